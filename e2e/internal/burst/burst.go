// Package burst holds what the burst tools (cmd/bindrate, cmd/podwatch) share: the watch on the
// burst's pods and the quantiles of their waits.
package burst

import (
	"errors"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// NewClient is a clientset for `kubeconfig`; qps > 0 sets its rate limit (QPS and burst),
// else client-go's default applies.
func NewClient(kubeconfig string, qps float32) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kubeconfig, err)
	}
	if qps > 0 {
		cfg.QPS, cfg.Burst = qps, int(qps)
	}
	return kubernetes.NewForConfig(cfg)
}

// WatchPods calls note with every pod of `selector` in `namespace` as the watch sees it added or
// changed, from the initial list on, until stop is closed; it returns once that list was seen.
func WatchPods(client kubernetes.Interface, namespace, selector string, stop <-chan struct{},
	note func(*corev1.Pod)) error {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	informer := factory.Core().V1().Pods().Informer()
	each := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			note(p)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    each,
		UpdateFunc: func(_, obj any) { each(obj) },
	}); err != nil {
		return err
	}
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, informer.HasSynced) {
		return errors.New("the pod informer did not sync")
	}
	return nil
}

// Quantile of sorted values, nearest rank (q in (0, 1]); 0 for none.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	return sorted[i]
}
