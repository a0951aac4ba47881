// fakeagent does for the scale harness's fake (kwok) nodes the one thing gpushare-node does
// through the API on a real node that gpushare-scheduler depends on: it confirms where each
// memory share, fraction and whole GPU runs. On a real node the agent reads kubelet's
// PodResources and writes the truth into the pod (docs/memory-shares.md, "Confirmation"):
//
//	ALIYUN_COM_GPU_MEM_ASSIGNED=true
//	gpushare.io/gpu-mem-confirmed=<the containers' GPUs>
//
// A kwok node has no kubelet and allocates nothing, so the truth is the scheduler's plan
// (gpushare.io/gpu-mem-assumed): what gpushare-node confirms when kubelet took its advice.
// Without it every pod on a fake node stays "assumed" forever, and after a restart
// gpushare-scheduler would keep every node with such pods shut for new shares (it waits for
// the pods pending there to be confirmed or gone, core/memshare_ledger.h ReleaseNeedsGuard).
//
// It confirms a pod once kwok has made it Running (kubelet admits, then the agent confirms),
// with a merge patch that carries the pod's UID, so a pod deleted and created again under the
// same name is never confirmed with its predecessor's plan. Only pods bound to nodes with the
// harness's label are touched.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

const (
	assumedKey   = "gpushare.io/gpu-mem-assumed"
	confirmedKey = "gpushare.io/gpu-mem-confirmed"
	assignedKey  = "ALIYUN_COM_GPU_MEM_ASSIGNED"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig")
	nodeLabel := flag.String("node-label", "gpushare.io/scale-harness=true", "key=value of the fake nodes")
	workers := flag.Int("workers", 8, "patches in flight")
	qps := flag.Float64("qps", 200, "API client QPS (burst twice that)")
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail("%s: %v", *kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = float32(*qps), int(2**qps)
	cfg.UserAgent = "gpushare-e2e-fakeagent"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
		}))
	pods := factory.Core().V1().Pods()
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = *nodeLabel }))
	nodes := nodeFactory.Core().V1().Nodes()

	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && wants(p) {
			if key, err := cache.MetaNamespaceKeyFunc(p); err == nil {
				queue.Add(key)
			}
		}
	}
	pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	nodes.Informer() // registered before Start: a factory starts only the informers asked for
	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced, nodes.Informer().HasSynced) {
		fail("informers did not sync")
	}
	fmt.Printf("fakeagent: confirming pods on nodes %s\n", *nodeLabel)

	var confirmed, failed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				key, quit := queue.Get()
				if quit {
					return
				}
				err := confirm(ctx, client, pods.Lister(), nodes.Lister(), key)
				switch {
				case err == nil:
					queue.Forget(key)
				case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err):
					queue.Forget(key) // gone, or another pod under the name: the next event decides
				default:
					failed.Add(1)
					fmt.Fprintf(os.Stderr, "fakeagent: %s: %v (retrying)\n", key, err)
					queue.AddRateLimited(key)
				}
				if err == nil {
					confirmed.Add(1)
				}
				queue.Done(key)
			}
		}()
	}
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			queue.ShutDown()
			wg.Wait()
			fmt.Printf("fakeagent: stopped; %d pods confirmed, %d patches retried\n", confirmed.Load(), failed.Load())
			return
		case <-tick.C:
			fmt.Printf("fakeagent: %d pods confirmed, %d patches retried\n", confirmed.Load(), failed.Load())
		}
	}
}

// wants: Running on a node, planned by gpushare-scheduler, not confirmed yet.
func wants(p *corev1.Pod) bool {
	a := p.Annotations
	return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil &&
		a[assumedKey] != "" && (a[assignedKey] != "true" || a[confirmedKey] == "")
}

func confirm(ctx context.Context, client kubernetes.Interface, pods corev1listers.PodLister,
	nodes corev1listers.NodeLister, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	p, err := pods.Pods(ns).Get(name)
	if err != nil || !wants(p) {
		return nil // gone, or nothing to do any more
	}
	if _, err := nodes.Get(p.Spec.NodeName); err != nil {
		return nil // not a fake node of the harness
	}
	var plan map[string]int
	if err := json.Unmarshal([]byte(p.Annotations[assumedKey]), &plan); err != nil {
		fmt.Fprintf(os.Stderr, "fakeagent: %s: unreadable %s %q: %v (left alone)\n", key, assumedKey, p.Annotations[assumedKey], err)
		return nil
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": p.UID,
		"annotations": map[string]string{
			assignedKey:  "true",
			confirmedKey: p.Annotations[assumedKey],
		},
	}})
	_, err = client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	return err
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "fakeagent: "+format+"\n", args...)
	os.Exit(1)
}
