// podresources asks a kubelet's PodResources API which devices each container holds and prints
// one line per device allocation (v1 List):
//
//	<namespace>/<pod>/<container> <resource> <device-id> [<device-id>...]
//
// The e2e tests compare this, the real kubelet's record, with what gpushare wrote into the
// pods' annotations. Run it inside the node's mount namespace (nsenter -t <holder> -m) or give
// the socket with -socket.
//
// With -allocatable it prints "<resource> <count>" per resource of GetAllocatableResources:
// the healthy devices of the device plugins registered with the kubelet now.
//
// With -registered it measures a re-registration after a kubelet restart: it waits until the
// kubelet's device-plugin socket is newer than -after (the new kubelet has started its device
// manager), then polls GetAllocatableResources until every resource of -want has its count,
// and prints the milliseconds from the socket's creation to that moment.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

func main() {
	socket := flag.String("socket", "/var/lib/kubelet/pod-resources/kubelet.sock", "kubelet's PodResources socket")
	timeout := flag.Duration("timeout", 10*time.Second, "deadline of one call")
	allocatable := flag.Bool("allocatable", false, "print the allocatable devices per resource instead of the allocations")
	registered := flag.Bool("registered", false, "wait for the resources of -want after a kubelet restart and print how long it took")
	want := flag.String("want", "", "with -registered: resource=count,... that must all be allocatable")
	after := flag.Int64("after", 0, "with -registered: unix nanoseconds; the device-plugin socket must be newer")
	dpSocket := flag.String("device-plugin-socket", "/var/lib/kubelet/device-plugins/kubelet.sock", "kubelet's device-plugin registration socket")
	wait := flag.Duration("wait", 120*time.Second, "with -registered: how long to wait in all")
	flag.Parse()

	if *registered {
		os.Exit(waitRegistered(*socket, *dpSocket, *want, *after, *timeout, *wait))
	}
	client, closeConn, err := dial(*socket)
	if err != nil {
		fail("%s: %v", *socket, err)
	}
	defer closeConn()

	switch {
	case *allocatable:
		counts, err := allocatableCounts(client, *timeout)
		if err != nil {
			fail("GetAllocatableResources on %s: %v", *socket, err)
		}
		names := make([]string, 0, len(counts))
		for r := range counts {
			names = append(names, r)
		}
		sort.Strings(names)
		for _, r := range names {
			fmt.Printf("%s %d\n", r, counts[r])
		}
	default:
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		resp, err := client.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
		if err != nil {
			fail("List on %s: %v", *socket, err)
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
}

// dial: a client of the PodResources socket (connected lazily, on the first call).
func dial(socket string) (podresourcesv1.PodResourcesListerClient, func(), error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return podresourcesv1.NewPodResourcesListerClient(conn), func() { conn.Close() }, nil
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "podresources: "+format+"\n", args...)
	os.Exit(1)
}

// allocatableCounts: the number of allocatable device IDs per resource.
func allocatableCounts(client podresourcesv1.PodResourcesListerClient, timeout time.Duration) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := client.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, d := range resp.GetDevices() {
		counts[d.GetResourceName()] += len(d.GetDeviceIds())
	}
	return counts, nil
}

func parseWant(s string) (map[string]int, error) {
	want := map[string]int{}
	for _, kv := range strings.Split(s, ",") {
		name, count, ok := strings.Cut(strings.TrimSpace(kv), "=")
		n, err := strconv.Atoi(count)
		if !ok || name == "" || err != nil || n <= 0 {
			return nil, fmt.Errorf("-want: %q is not resource=count", kv)
		}
		want[name] = n
	}
	return want, nil
}

func waitRegistered(socket, dpSocket, wantText string, after int64,
	timeout, wait time.Duration) int {
	want, err := parseWant(wantText)
	if err != nil {
		fail("%v", err)
	}
	deadline := time.Now().Add(wait)
	var born time.Time
	for time.Now().Before(deadline) {
		if st, err := os.Stat(dpSocket); err == nil && st.ModTime().UnixNano() > after {
			born = st.ModTime()
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if born.IsZero() {
		fail("%s not re-created within %s", dpSocket, wait)
	}
	var last map[string]int
	for time.Now().Before(deadline) {
		// A connection per try: the kubelet re-creates its socket, and gRPC's reconnect backoff
		// (a second and more) would be measured instead of the registration.
		var counts map[string]int
		client, closeConn, err := dial(socket)
		if err == nil {
			counts, err = allocatableCounts(client, timeout)
			closeConn()
		}
		if err == nil {
			last = counts
			done := true
			for r, n := range want {
				if counts[r] != n {
					done = false
				}
			}
			if done {
				fmt.Printf("%d\n", time.Since(born).Milliseconds())
				return 0
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	fail("within %s of %s being created, allocatable was %v, want %v", wait, dpSocket, last, want)
	return 1
}
