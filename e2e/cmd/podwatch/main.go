// podwatch measures a burst that something else creates (a Deployment scaled up, as Knative
// scales a revision): it watches the pods of -selector in -namespace from before the burst,
// notes when the watch first sees each pod (its creation) and when it sees it bound, and once
// -count pods were seen and -bound of them bound (or at -timeout) prints
//
//	podwatch: <name>: <n> pods created over <s> s; <b> bound, the last <s> s after the last creation; wait to bind p50 <s> s, p99 <s> s
//	podwatch-result name=<name> pods=<n> bound=<b> create_s=<s> bind_s=<s> after_last_create_s=<s> p50_s=<s> p99_s=<s>
//
// Times count from the first pod seen; after_last_create_s is the last bind less the last
// creation (negative when every pod was bound before the last one was created), the figure
// "every placeable pod bound within X s of the creation of the last one". Start it before the
// burst: it prints "podwatch: watching" once its watch is established.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/e2e/internal/burst"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig")
	namespace := flag.String("namespace", "default", "namespace of the pods")
	selector := flag.String("selector", "", "label selector of the burst's pods (required)")
	name := flag.String("name", "burst", "what to call it in the output")
	count := flag.Int("count", 0, "pods the burst creates (required)")
	want := flag.Int("bound", 0, "pods of it that can be placed (default: -count)")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	flag.Parse()
	if *selector == "" || *count <= 0 {
		fail("-selector and a positive -count are required")
	}
	if *want <= 0 || *want > *count {
		*want = *count
	}
	client, err := burst.NewClient(*kubeconfig, 0)
	if err != nil {
		fail("%v", err)
	}
	var mu sync.Mutex
	created := map[string]time.Time{}
	bound := map[string]time.Time{}
	changed := make(chan struct{}, 1)
	note := func(p *corev1.Pod) {
		if p.DeletionTimestamp != nil {
			return
		}
		now := time.Now()
		mu.Lock()
		if _, ok := created[p.Name]; !ok {
			created[p.Name] = now
		}
		if _, ok := bound[p.Name]; !ok && p.Spec.NodeName != "" {
			bound[p.Name] = now
		}
		mu.Unlock()
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	stop := make(chan struct{})
	defer close(stop)
	if err := burst.WatchPods(client, *namespace, *selector, stop, note); err != nil {
		fail("%v", err)
	}
	mu.Lock()
	if len(created) > 0 {
		mu.Unlock()
		fail("%d pods of %s exist already: start podwatch before the burst", len(created), *selector)
	}
	mu.Unlock()
	fmt.Println("podwatch: watching")
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	for done := false; !done; {
		mu.Lock()
		nc, nb := len(created), len(bound)
		mu.Unlock()
		if nc >= *count && nb >= *want {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			done = true
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var first, lastCreate, lastBind time.Time
	for _, t := range created {
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(lastCreate) {
			lastCreate = t
		}
	}
	waits := []float64{}
	for n, b := range bound {
		if b.After(lastBind) {
			lastBind = b
		}
		waits = append(waits, b.Sub(created[n]).Seconds())
	}
	if len(created) == 0 || len(bound) == 0 {
		fail("%s: after %s, %d pods seen, %d bound", *name, *timeout, len(created), len(bound))
	}
	sort.Float64s(waits)
	p50, p99 := burst.Quantile(waits, 0.5), burst.Quantile(waits, 0.99)
	after := lastBind.Sub(lastCreate).Seconds()
	fmt.Printf("podwatch: %s: %d pods created over %.2f s; %d bound, the last %.2f s after the last creation; wait to bind p50 %.2f s, p99 %.2f s\n",
		*name, len(created), lastCreate.Sub(first).Seconds(), len(bound), after, p50, p99)
	fmt.Printf("podwatch-result name=%s pods=%d bound=%d create_s=%.3f bind_s=%.3f after_last_create_s=%.3f p50_s=%.3f p99_s=%.3f\n",
		*name, len(created), len(bound), lastCreate.Sub(first).Seconds(), lastBind.Sub(first).Seconds(), after, p50, p99)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "podwatch: "+format+"\n", args...)
	os.Exit(1)
}
