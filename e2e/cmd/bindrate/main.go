// bindrate measures how fast the real kube-scheduler binds pods of one shape: it creates
// -count pods at once (concurrently, faster than the scheduler binds them), watches them, and
// prints when the first and last were bound and, with -running, when all were Running:
//
//	bindrate: <name>: <count> pods created in <s> s; bound <count> in <s> s: <rate> pods/s; Running <s> s
//	bindrate-result name=<name> count=<n> create_s=<s> bind_s=<s> pods_per_s=<rate> running_s=<s> p50_s=<s> p99_s=<s>
//
// Times count from the first Create call; the rate is count / (last bind - first Create).
// p50_s and p99_s: each pod's wait from its creation (its Create call returning) to the watch
// seeing it bound, at the median and the 99th percentile.
// With -pause-pid (kube-scheduler's pid; it must not use leader election) the scheduler is
// stopped (SIGSTOP) while the pods are created and continued (SIGCONT) once the watch has seen
// them all, and times count from SIGCONT: the rate is then the scheduler's alone, not bounded by
// how fast the pods can be created, and each pod's wait counts from SIGCONT.
// The pods carry the label bindrate=<name>; deleting them is the caller's business.
//
// -resource takes a comma-separated list (nvidia.com/gpu=1,nvidia.com/gpumem=3072),
// -scheduler-name sends the pods to another scheduler (a peer's kube-scheduler), and with
// -partial a burst that is not all bound by -timeout is reported, not failed: the result line
// then has bound=<n> of count (pods/s and the waits over the bound ones), and -running is
// waited for only on the bound pods.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/e2e/internal/burst"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "admin kubeconfig")
	namespace := flag.String("namespace", "default", "namespace of the pods")
	name := flag.String("name", "", "the pods' name prefix and bindrate label (required)")
	count := flag.Int("count", 100, "how many pods")
	res := flag.String("resource", "", "resource=quantity[,resource=quantity...] the container asks for (limits)")
	schedulerName := flag.String("scheduler-name", "", "the pods' schedulerName (default: kube-scheduler's default-scheduler)")
	partial := flag.Bool("partial", false, "at -timeout, report the pods bound so far instead of failing")
	selector := flag.String("node-selector", "", "key=value the pods' nodeSelector, if any")
	image := flag.String("image", "e2e.local/busybox:1.35", "the image (imagePullPolicy Never)")
	running := flag.Bool("running", false, "wait until every pod is Running too")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	pausePid := flag.Int("pause-pid", 0, "kube-scheduler's pid: stopped while the pods are created")
	flag.Parse()
	if *name == "" || *count <= 0 {
		fail("-name and a positive -count are required")
	}

	// The client must not be what limits the rate: create as fast as the API server takes it.
	client, err := burst.NewClient(*kubeconfig, 1000)
	if err != nil {
		fail("%v", err)
	}
	pod := template(*name, *namespace, *image, *res, *selector)
	pod.Spec.SchedulerName = *schedulerName

	var mu sync.Mutex
	seen := map[string]bool{}
	bound := map[string]time.Time{}
	run := map[string]time.Time{}
	createdAt := map[string]time.Time{}
	changed := make(chan struct{}, 1)
	note := func(p *corev1.Pod) {
		now := time.Now()
		mu.Lock()
		seen[p.Name] = true
		if _, seen := bound[p.Name]; !seen && p.Spec.NodeName != "" {
			bound[p.Name] = now
		}
		if _, seen := run[p.Name]; !seen && p.Status.Phase == corev1.PodRunning {
			run[p.Name] = now
		}
		mu.Unlock()
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	stop := make(chan struct{})
	defer close(stop)
	if err := burst.WatchPods(client, *namespace, "bindrate="+*name, stop, note); err != nil {
		fail("%v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *pausePid > 0 {
		if err := syscall.Kill(*pausePid, syscall.SIGSTOP); err != nil {
			fail("SIGSTOP %d: %v", *pausePid, err)
		}
		// Continued whatever happens below: fail exits without running deferred calls.
		resume = func() { syscall.Kill(*pausePid, syscall.SIGCONT) }
		defer resume()
	}
	start := time.Now()
	var created time.Duration
	{
		var wg sync.WaitGroup
		errs := make(chan error, *count)
		next := make(chan int)
		for w := 0; w < 32; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					p := pod.DeepCopy()
					p.Name = fmt.Sprintf("%s-%03d", *name, i)
					if _, err := client.CoreV1().Pods(*namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
						errs <- fmt.Errorf("creating %s: %w", p.Name, err)
						continue
					}
					now := time.Now()
					mu.Lock()
					createdAt[p.Name] = now
					mu.Unlock()
				}
			}()
		}
		for i := 0; i < *count; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
		created = time.Since(start)
		close(errs)
		if err := <-errs; err != nil {
			fail("%v", err)
		}
	}

	if *pausePid > 0 {
		for {
			mu.Lock()
			ns, nb := len(seen), len(bound)
			mu.Unlock()
			if nb > 0 {
				fail("%d pods bound while kube-scheduler (pid %d) was stopped: is it the scheduler?", nb, *pausePid)
			}
			if ns == *count {
				break
			}
			select {
			case <-changed:
			case <-ctx.Done():
				fail("%s: the watch saw %d of %d pods created", *name, ns, *count)
			}
		}
		start = time.Now()
		if err := syscall.Kill(*pausePid, syscall.SIGCONT); err != nil {
			fail("SIGCONT %d: %v", *pausePid, err)
		}
	}
	timedOut := false
	for !timedOut {
		mu.Lock()
		nb, nr := len(bound), len(run)
		mu.Unlock()
		if nb == *count && (!*running || nr == *count) {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if !*partial {
				fail("%s: after %s, %d of %d pods bound, %d Running", *name, *timeout, nb, *count, nr)
			}
			timedOut = true
		}
	}
	last := func(m map[string]time.Time) time.Duration {
		var t time.Time
		for _, v := range m {
			if v.After(t) {
				t = v
			}
		}
		return t.Sub(start)
	}
	mu.Lock()
	nbound := len(bound)
	mu.Unlock()
	bind := last(bound)
	rate := float64(nbound) / bind.Seconds()
	if nbound == 0 { // -partial, nothing bound
		bind, rate = *timeout, 0
	}
	runningS := "-" // not waited for, or (-partial) not every pod bound
	if *running && !timedOut {
		runningS = fmt.Sprintf("%.2f", last(run).Seconds())
	}
	from := "the first Create"
	if *pausePid > 0 {
		from = "SIGCONT of the scheduler"
	}
	mu.Lock()
	waits := make([]float64, 0, len(bound))
	for n, b := range bound {
		from := start
		if c, ok := createdAt[n]; ok && c.After(from) {
			from = c
		}
		w := b.Sub(from).Seconds()
		if w < 0 { // the watch saw the bind before the Create call returned
			w = 0
		}
		waits = append(waits, w)
	}
	mu.Unlock()
	sort.Float64s(waits)
	p50, p99 := burst.Quantile(waits, 0.50), burst.Quantile(waits, 0.99)
	fmt.Printf("bindrate: %s: %d pods created in %.2f s; bound %d in %.2f s from %s: %.1f pods/s; wait to bind p50 %.2f s, p99 %.2f s; Running %s s\n",
		*name, *count, created.Seconds(), nbound, bind.Seconds(), from, rate, p50, p99, runningS)
	if timedOut {
		fmt.Printf("bindrate: %s: %d of %d pods not bound after %s\n", *name, *count-nbound, *count, *timeout)
	}
	fmt.Printf("bindrate-result name=%s count=%d bound=%d create_s=%.2f bind_s=%.2f pods_per_s=%.1f running_s=%s p50_s=%.3f p99_s=%.3f\n",
		*name, *count, nbound, created.Seconds(), bind.Seconds(), rate, runningS, p50, p99)
}

func template(name, namespace, image, res, selector string) *corev1.Pod {
	grace := int64(1)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Labels: map[string]string{"bindrate": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:            "c",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"/bin/sh", "-c", "exec sleep 3600"},
			}},
		},
	}
	if res != "" {
		limits := corev1.ResourceList{}
		for _, item := range strings.Split(res, ",") {
			r, q, ok := strings.Cut(item, "=")
			qty, err := resource.ParseQuantity(q)
			if !ok || err != nil || r == "" {
				fail("-resource: %q is not name=quantity", item)
			}
			limits[corev1.ResourceName(r)] = qty
		}
		p.Spec.Containers[0].Resources.Limits = limits
	}
	if selector != "" {
		k, v, ok := strings.Cut(selector, "=")
		if !ok {
			fail("-node-selector: %q is not key=value", selector)
		}
		p.Spec.NodeSelector = map[string]string{k: v}
	}
	return p
}

// resume continues a scheduler stopped by -pause-pid (no-op otherwise).
var resume = func() {}

func fail(format string, args ...any) {
	resume()
	fmt.Fprintf(os.Stderr, "bindrate: "+format+"\n", args...)
	os.Exit(1)
}
