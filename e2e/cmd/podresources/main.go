// podresources asks a kubelet's PodResources API (v1 List) which devices each container holds
// and prints one line per device allocation:
//
//	<namespace>/<pod>/<container> <resource> <device-id> [<device-id>...]
//
// The e2e tests compare this, the real kubelet's record, with what gpushare wrote into the
// pods' annotations. Run it inside the node's mount namespace (nsenter -t <holder> -m) or give
// the socket with -socket.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

func main() {
	socket := flag.String("socket", "/var/lib/kubelet/pod-resources/kubelet.sock", "kubelet's PodResources socket")
	timeout := flag.Duration("timeout", 10*time.Second, "deadline of the List call")
	flag.Parse()

	conn, err := grpc.NewClient("unix://"+*socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "podresources: %s: %v\n", *socket, err)
		os.Exit(1)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	resp, err := podresourcesv1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "podresources: List on %s: %v\n", *socket, err)
		os.Exit(1)
	}
	for _, p := range resp.GetPodResources() {
		for _, c := range p.GetContainers() {
			for _, d := range c.GetDevices() {
				fmt.Printf("%s/%s/%s %s %s\n", p.GetNamespace(), p.GetName(), c.GetName(),
					d.GetResourceName(), strings.Join(d.GetDeviceIds(), " "))
			}
		}
	}
}
