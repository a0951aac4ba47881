// hamistandin does, for the scale harness's fake nodes, what HAMi's device plugin does for HAMi's
// scheduler on a real node (docs/e2e.md, "HAMi side by side"; the facts, from HAMi's source at
// the commit the harness builds, in ../shared/reference/hami-scheduler.md):
//
//   - registration, once per node: the annotation hami.io/node-nvidia-register (a JSON list, one
//     entry per GPU: id, index, count, devmem in MiB, devcore, type, numa, mode, health), made
//     from the node's gpushare.io/gpu-inventory annotation (the same GPUs gpushare-scheduler sees),
//     and nvidia.com/gpu in the node's capacity and allocatable (the split count x the GPUs), which
//     HAMi's scheduler reads as the device plugin's sign of life. With -preseed-handshakes, the
//     handshake annotations of HAMi's five handshaking vendors are written too, as already
//     requested long ago, so that HAMi's first pass over a new node makes no API call of its own
//     (at the QPS its chart gives it, 10 calls a node take 2 s: 1,213 nodes, 40 minutes, during
//     which its filter waits);
//   - after each bind (the pod bound to its node with hami.io/bind-phase=allocating): what the
//     plugin does once kubelet's Allocate for the pod succeeded, -allocate-delay after the bind
//     is seen: the pod's hami.io/bind-phase set to success, then the node's lock
//     (hami.io/mutex.lock) removed when this pod holds it, with the node's resourceVersion as a
//     precondition, as the plugin removes it.
//
// It prints "hamistandin: registered N nodes" once every node of -node-label is registered, and
// on SIGTERM a line with its counts.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

const (
	registerKey  = "hami.io/node-nvidia-register"
	lockKey      = "hami.io/mutex.lock"
	bindPhaseKey = "hami.io/bind-phase"
	inventoryKey = "gpushare.io/gpu-inventory"
)

// The handshake annotations of the vendors HAMi's scheduler initialises whatever its device
// config holds.
var handshakeKeys = []string{"hami.io/node-handshake", "hami.io/node-handshake-dcu",
	"hami.io/node-handshake-va", "hami.io/node-handshake-biren", "hami.io/node-handshake-xpu"}

type inventory struct {
	GPUs []struct {
		Index     int    `json:"index"`
		UUID      string `json:"uuid"`
		Model     string `json:"model"`
		MemoryMiB int64  `json:"memoryMiB"`
		Health    string `json:"health"`
	} `json:"gpus"`
}

// registerEntry is one GPU of hami.io/node-nvidia-register. Every field is written (HAMi reads a
// missing health as false).
type registerEntry struct {
	ID      string `json:"id"`
	Index   int    `json:"index"`
	Count   int    `json:"count"`
	Devmem  int64  `json:"devmem"`
	Devcore int    `json:"devcore"`
	Type    string `json:"type"`
	Numa    int    `json:"numa"`
	Mode    string `json:"mode"`
	Health  bool   `json:"health"`
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig")
	nodeLabel := flag.String("node-label", "", "the nodes to register (key=value)")
	split := flag.Int("split", 10, "HAMi's deviceSplitCount: tasks per GPU")
	scheduler := flag.String("scheduler-name", "hami-scheduler", "the pods to complete binds for")
	delay := flag.Duration("allocate-delay", 0, "from a bind seen to the lock released (kubelet's Allocate)")
	preseed := flag.Bool("preseed-handshakes", true, "write the five handshake annotations as long requested")
	workers := flag.Int("workers", 16, "API calls in flight")
	flag.Parse()
	if *nodeLabel == "" || *split <= 0 {
		fail("-node-label and a positive -split are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail("%s: %v", *kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail("%v", err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	var registered, released, phases, lockMissing, errorsSeen atomic.Int64
	nodeQueue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	podQueue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	var doneMu sync.Mutex
	done := map[string]bool{} // nodes registered, pods completed (by UID)

	nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = *nodeLabel }))
	nodes := nodeFactory.Core().V1().Nodes()
	nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { nodeQueue.Add(obj.(*corev1.Node).Name) },
		UpdateFunc: func(_, obj any) { nodeQueue.Add(obj.(*corev1.Node).Name) },
	})
	podFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = "spec.schedulerName=" + *scheduler
		}))
	pods := podFactory.Core().V1().Pods()
	onPod := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" || p.Annotations[bindPhaseKey] != "allocating" {
			return
		}
		doneMu.Lock()
		seen := done[string(p.UID)]
		doneMu.Unlock()
		if seen {
			return
		}
		key := p.Namespace + "/" + p.Name
		if *delay > 0 {
			podQueue.AddAfter(key, *delay)
		} else {
			podQueue.Add(key)
		}
	}
	pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onPod,
		UpdateFunc: func(_, obj any) { onPod(obj) },
	})
	nodeFactory.Start(ctx.Done())
	podFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced, pods.Informer().HasSynced) {
		fail("informers did not sync")
	}

	register := func(name string) error {
		n, err := nodes.Lister().Get(name)
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		var inv inventory
		if err := json.Unmarshal([]byte(n.Annotations[inventoryKey]), &inv); err != nil || len(inv.GPUs) == 0 {
			return nil // not a GPU node (yet): its next update comes back here
		}
		entries := make([]registerEntry, 0, len(inv.GPUs))
		for _, g := range inv.GPUs {
			model := g.Model
			if !strings.Contains(strings.ToLower(model), "nvidia") {
				model = "NVIDIA-" + model
			}
			entries = append(entries, registerEntry{ID: g.UUID, Index: g.Index, Count: *split,
				Devmem: g.MemoryMiB, Devcore: 100, Type: model, Mode: "hami-core",
				Health: g.Health == "" || g.Health == "Healthy"})
		}
		reg, _ := json.Marshal(entries)
		want := resource.MustParse(fmt.Sprint(*split * len(inv.GPUs)))
		have, ok := n.Status.Allocatable["nvidia.com/gpu"]
		if n.Annotations[registerKey] == string(reg) && ok && have.Cmp(want) == 0 {
			doneMu.Lock()
			first := !done[name]
			done[name] = true
			doneMu.Unlock()
			if first {
				registered.Add(1)
			}
			return nil
		}
		ann := map[string]any{registerKey: string(reg)}
		if *preseed {
			for _, k := range handshakeKeys {
				if !strings.Contains(n.Annotations[k], "Requesting") {
					ann[k] = "Requesting_2000-01-01 00:00:00"
				}
			}
		}
		meta, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		if _, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, meta, metav1.PatchOptions{}); err != nil {
			return err
		}
		status, _ := json.Marshal(map[string]any{"status": map[string]any{
			"capacity":    map[string]string{"nvidia.com/gpu": want.String()},
			"allocatable": map[string]string{"nvidia.com/gpu": want.String()},
		}})
		_, err = client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, status, metav1.PatchOptions{}, "status")
		return err // the update it causes brings the node back here, to be counted
	}

	complete := func(key string) error {
		ns, name, _ := strings.Cut(key, "/")
		p, err := pods.Lister().Pods(ns).Get(name)
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if p.Annotations[bindPhaseKey] == "allocating" {
			patch := []byte(`{"metadata":{"annotations":{"` + bindPhaseKey + `":"success"}}}`)
			if _, err := client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			}
			phases.Add(1)
		}
		node, err := client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		lock := node.Annotations[lockKey]
		if !strings.HasSuffix(lock, ","+ns+","+name) {
			lockMissing.Add(1) // already released, or taken by another pod since
		} else {
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
				"annotations":     map[string]any{lockKey: nil},
				"resourceVersion": node.ResourceVersion,
			}})
			if _, err := client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return err // a conflict: the node changed; read it again
			}
			released.Add(1)
		}
		doneMu.Lock()
		done[string(p.UID)] = true
		doneMu.Unlock()
		return nil
	}

	run := func(q workqueue.TypedRateLimitingInterface[string], fn func(string) error) {
		for {
			key, quit := q.Get()
			if quit {
				return
			}
			if err := fn(key); err != nil {
				errorsSeen.Add(1)
				if q.NumRequeues(key) < 20 {
					q.AddRateLimited(key)
				} else {
					fmt.Fprintf(os.Stderr, "hamistandin: %s: giving up: %v\n", key, err)
					q.Forget(key)
				}
			} else {
				q.Forget(key)
			}
			q.Done(key)
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < *workers; i++ {
		wg.Add(2)
		go func() { defer wg.Done(); run(nodeQueue, register) }()
		go func() { defer wg.Done(); run(podQueue, complete) }()
	}
	fmt.Println("hamistandin: registering the nodes of " + *nodeLabel)
	go func() {
		announced := int64(-1)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			all, _ := nodes.Lister().List(labels.Everything())
			if n := registered.Load(); n != announced && n >= int64(len(all)) && len(all) > 0 {
				fmt.Printf("hamistandin: registered %d nodes\n", n)
				announced = n
			}
		}
	}()
	<-ctx.Done()
	nodeQueue.ShutDown()
	podQueue.ShutDown()
	wg.Wait()
	fmt.Printf("hamistandin: done: %d nodes registered, %d binds completed, %d locks released, %d locks not held by their pod, %d retried errors\n",
		registered.Load(), phases.Load(), released.Load(), lockMissing.Load(), errorsSeen.Load())
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "hamistandin: "+format+"\n", args...)
	os.Exit(1)
}
