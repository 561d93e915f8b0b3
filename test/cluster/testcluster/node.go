package main

// The node of `testcluster start --node DIR`: next to etcd and the API server,
// containerd, kube-controller-manager, kube-scheduler, kube-proxy (iptables
// mode) and a kubelet that registers Node node-a, so that pods run for real.
//
// A node changes the host, not only DIR: a bridge and veths, iptables chains,
// mounts (pod volumes, container root filesystems, network namespaces under
// /run/netns), cgroups (kubepods), a few sysctls and fixed paths the kubelet
// uses whatever its root directory (/var/lib/kubelet/device-plugins,
// /var/log/containers). start records the host's state in
// DIR/nodefs/host-state first; stop (also from the watchdog, and after a
// kill -9 of anything) stops the processes in order and undoes exactly what is
// new since then. One node cluster runs on a host at a time (the bridge, the
// iptables chains and the kubepods cgroups are the host's); start refuses a
// second one.
//
// Files for tests: DIR/node (the node's name), DIR/containerd (the path of
// containerd's socket, for ctr --address and crictl), DIR/crictl.yaml.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	nodeName    = "node-a"
	podCIDR     = "10.244.0.0/16"
	bridgeName  = "rsc-cni0"
	cniNetwork  = "rsc-node"
	pauseImage  = "localhost/pause:test"
	nodeTimeout = 120 * time.Second
)

// nodeComponents in start order; stopNode goes its own way (kubelet first).
var nodeComponents = []string{"containerd", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet"}

// sysctls the kubelet, kube-proxy or the bridge plugin may rewrite; stop puts
// back the values start saw.
var nodeSysctls = []string{
	"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops",
	"net/ipv4/conf/all/route_localnet", "net/ipv4/ip_forward",
	"net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
}

// Fixed host paths the kubelet writes to; removed at stop if start did not see them.
var kubeletHostPaths = []string{"/var/lib/kubelet", "/var/log/containers"}

func nodeDir(dir string) string { return filepath.Join(dir, "nodefs") }

func hostStateDir(dir string) string { return filepath.Join(nodeDir(dir), "host-state") }

func containerdSocket(dir string) string {
	return filepath.Join(nodeDir(dir), "containerd", "containerd.sock")
}

func runcRoot(dir string) string { return filepath.Join(nodeDir(dir), "containerd", "runc") }

// hostAddress is the IPv4 address of the interface of the default route: the
// API server advertises it, so pods reach it through the kubernetes Service.
func hostAddress() (net.IP, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 2 || fields[1] != "00000000" {
			continue
		}
		iface, err := net.InterfaceByName(fields[0])
		if err != nil {
			return nil, err
		}
		addrs, err := iface.Addrs()
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				return n.IP.To4(), nil
			}
		}
		return nil, fmt.Errorf("the default route's interface %s has no IPv4 address", fields[0])
	}
	return nil, errors.New("no default route: a node needs an address pods can reach the API server at")
}

func nodeApiserverFlags(dir string, host net.IP) []string {
	p := func(name string) string { return filepath.Join(dir, "pki", name) }
	return []string{
		"--advertise-address=" + host.String(),
		"--bind-address=0.0.0.0",
		// Publishes the advertise address in the kubernetes Service's endpoints.
		"--endpoint-reconciler-type=lease",
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate=" + p("kubelet-client.crt"),
		"--kubelet-client-key=" + p("kubelet-client.key"),
	}
}

// nodePorts are picked free, so that nothing clashes with the well-known ones.
type nodePorts struct {
	kubelet, kubeletHealthz, proxyHealthz, proxyMetrics, kcm, scheduler, containerdStream int
}

// kubeletRootDir is the kubelet's --root-dir, as start --node chose it.
func kubeletRootDir(dir string) string {
	b, err := os.ReadFile(filepath.Join(nodeDir(dir), "kubelet-root-dir"))
	if err != nil {
		return filepath.Join(nodeDir(dir), "kubelet")
	}
	return strings.TrimSpace(string(b))
}

func startNode(dir, bin, kubeletRoot string) error {
	began := time.Now()
	// An earlier node of this DIR that was never stopped (its state would
	// be lost below).
	if err := stopNode(dir); err != nil {
		return fmt.Errorf("cleaning up an earlier node in %s: %w", dir, err)
	}
	if err := lockHost(dir); err != nil {
		return err
	}
	if _, err := net.InterfaceByName(bridgeName); err == nil {
		return fmt.Errorf("bridge %s exists: another node cluster runs on this host (stop it, or delete the link if it is a leftover)", bridgeName)
	}
	nd := nodeDir(dir)
	// Unix socket paths have at most 107 bytes; DRA drivers' sockets go
	// under DIR/nodefs/kubelet/plugins_registry/DRIVER-reg.sock.
	if n := len(containerdSocket(dir) + ".ttrpc"); n > 107 {
		return fmt.Errorf("%s is too long for the node's unix sockets (%d bytes > 107): use a shorter DIR", dir, n)
	}
	if len(nd) > 48 {
		fmt.Fprintf(os.Stderr, "testcluster: warning: with DIR %s (%d bytes) the kubelet's plugin sockets may exceed 107 bytes\n", dir, len(dir))
	}
	var err error
	if err = os.RemoveAll(nd); err != nil {
		return fmt.Errorf("%s: %w (are mounts left from an earlier node? run stop)", nd, err)
	}
	for _, sub := range []string{"host-state", "containerd", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "volume-plugins"} {
		if err := os.MkdirAll(filepath.Join(nd, sub), 0o755); err != nil {
			return err
		}
	}
	if kubeletRoot == "" {
		kubeletRoot = filepath.Join(nd, "kubelet")
	}
	if kubeletRoot, err = filepath.Abs(kubeletRoot); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(nd, "kubelet-root-dir"), []byte(kubeletRoot+"\n"), 0o644); err != nil {
		return err
	}
	if err := saveHostState(dir); err != nil {
		return fmt.Errorf("saving the host's state: %w", err)
	}
	ports, err := freePorts(7)
	if err != nil {
		return err
	}
	np := nodePorts{ports[0], ports[1], ports[2], ports[3], ports[4], ports[5], ports[6]}
	host, err := hostAddress()
	if err != nil {
		return err
	}
	server, err := os.ReadFile(filepath.Join(dir, "server"))
	if err != nil {
		return err
	}
	if err := writeNodeFiles(dir, strings.TrimSpace(string(server)), host, np); err != nil {
		return err
	}

	err = spawn(dir, "containerd", "/usr/bin/containerd", "--config", filepath.Join(nd, "containerd.toml"))
	if err != nil {
		return err
	}
	if err := waitFor(dir, "containerd", func() bool {
		return exec.Command("ctr", "--address", containerdSocket(dir), "version").Run() == nil
	}); err != nil {
		return err
	}
	for _, image := range []string{"pause.tar", "probe.tar"} {
		if err := importImage(dir, filepath.Join(bin, image)); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "testcluster: containerd ready with the images in %.1f s\n", time.Since(began).Seconds())

	kubeconfig := filepath.Join(dir, "kubeconfig")
	p := func(name string) string { return filepath.Join(dir, "pki", name) }
	err = spawn(dir, "kube-controller-manager", filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(np.kcm),
		"--service-account-private-key-file="+p("sa.key"),
		"--root-ca-file="+p("ca.crt"),
		"--use-service-account-credentials=true",
		// One client per controller, each with its own token: the default
		// 20 requests/s delay the controllers' start by seconds.
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--controllers=*",
		"--cluster-cidr="+podCIDR,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--profiling=false",
		"--v=1",
	)
	if err != nil {
		return err
	}
	err = spawn(dir, "kube-scheduler", filepath.Join(bin, "kube-scheduler"),
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(np.scheduler),
		"--profiling=false",
		"--v=1",
	)
	if err != nil {
		return err
	}
	err = spawn(dir, "kube-proxy", filepath.Join(bin, "kube-proxy"),
		"--kubeconfig="+kubeconfig,
		"--proxy-mode=iptables",
		"--cluster-cidr="+podCIDR,
		"--hostname-override="+nodeName,
		"--healthz-bind-address=127.0.0.1:"+strconv.Itoa(np.proxyHealthz),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(np.proxyMetrics),
		// Leave the host's conntrack settings alone.
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0s",
		"--conntrack-tcp-timeout-close-wait=0s",
		"--iptables-localhost-nodeports=false",
		"--profiling=false",
		"--v=1",
	)
	if err != nil {
		return err
	}
	kubeletStarted := time.Now()
	if err := spawnKubelet(dir, false); err != nil {
		return err
	}

	admin, err := adminClientOf(dir)
	if err != nil {
		return err
	}
	base := strings.TrimSpace(string(server))
	if err := waitFor(dir, "kubelet", func() bool { return nodeReady(admin, base, time.Time{}) }); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "testcluster: node %s Ready %.1f s after the kubelet started (%.1f s after the node's start)\n",
		nodeName, time.Since(kubeletStarted).Seconds(), time.Since(began).Seconds())
	if err := waitFor(dir, "kube-controller-manager", func() bool {
		return apiOK(admin, base+"/api/v1/namespaces/default/serviceaccounts/default") &&
			apiOK(admin, base+"/api/v1/namespaces/default/configmaps/kube-root-ca.crt")
	}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "testcluster: ServiceAccount default/default after %.1f s\n", time.Since(began).Seconds())
	proxyHealthz := fmt.Sprintf("http://127.0.0.1:%d/healthz", np.proxyHealthz)
	if err := waitFor(dir, "kube-proxy", func() bool { return apiOK(http.DefaultClient, proxyHealthz) }); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "testcluster: kube-proxy synced after %.1f s\n", time.Since(began).Seconds())
	if err := os.WriteFile(filepath.Join(dir, "containerd"), []byte(containerdSocket(dir)+"\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "node"), []byte(nodeName+"\n"), 0o644)
}

// writeNodeFiles writes the configuration of containerd, CNI, the kubelet and crictl.
func writeNodeFiles(dir, server string, host net.IP, np nodePorts) error {
	nd := nodeDir(dir)
	c := filepath.Join(nd, "containerd")
	files := map[string]string{}
	files[filepath.Join(nd, "containerd.toml")] = fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # Without it every sandbox fails here: "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "%d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, filepath.Join(c, "root"), filepath.Join(c, "state"), containerdSocket(dir), containerdSocket(dir)+".ttrpc",
		filepath.Join(c, "opt"), pauseImage, np.containerdStream, runcRoot(dir), filepath.Join(nd, "cni", "net.d"))

	cni, err := json.MarshalIndent(map[string]any{
		"cniVersion": "0.4.0",
		"name":       cniNetwork,
		"plugins": []map[string]any{
			{
				"type": "bridge", "bridge": bridgeName, "isGateway": true, "ipMasq": true, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": podCIDR}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(nd, "cni", "ipam"),
				},
			},
			{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}, "", "  ")
	if err != nil {
		return err
	}
	files[filepath.Join(nd, "cni", "net.d", "10-"+cniNetwork+".conflist")] = string(cni)

	token, err := os.ReadFile(filepath.Join(dir, "tokens", nodeName))
	if err != nil {
		return err
	}
	files[filepath.Join(nd, "kubelet.kubeconfig")] = fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: test
  context: {cluster: test, user: %s}
current-context: test
`, server, filepath.Join(dir, "pki", "ca.crt"), nodeName, strings.TrimSpace(string(token)), nodeName)
	files[filepath.Join(nd, "resolv.conf")] = podResolvConf()
	files[filepath.Join(nd, "kubelet.yaml")] = fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://%s
volumePluginDir: %s
podLogsDir: %s
resolvConf: %s
clusterDomain: cluster.local
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
shutdownGracePeriod: 0s
`, host, np.kubelet, np.kubeletHealthz, filepath.Join(dir, "pki", "ca.crt"), containerdSocket(dir),
		filepath.Join(nd, "volume-plugins"), filepath.Join(nd, "pod-logs"), filepath.Join(nd, "resolv.conf"))
	files[filepath.Join(dir, "crictl.yaml")] = fmt.Sprintf("runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 30\n",
		containerdSocket(dir), containerdSocket(dir))
	for name, content := range files {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// podResolvConf is the host's name servers without its search domains
// (there is no cluster DNS; loopback servers are unreachable from pods).
func podResolvConf() string {
	var out strings.Builder
	b, _ := os.ReadFile("/etc/resolv.conf")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "nameserver" {
			if ip := net.ParseIP(f[1]); ip != nil && !ip.IsLoopback() {
				fmt.Fprintf(&out, "nameserver %s\n", ip)
			}
		}
	}
	return out.String()
}

// spawnKubelet starts the kubelet; a restart keeps the earlier log as kubelet.log.N.
func spawnKubelet(dir string, restart bool) error {
	nd := nodeDir(dir)
	if restart {
		log := filepath.Join(dir, "logs", "kubelet.log")
		for n := 1; ; n++ {
			old := fmt.Sprintf("%s.%d", log, n)
			if _, err := os.Stat(old); errors.Is(err, os.ErrNotExist) {
				_ = os.Rename(log, old)
				break
			}
		}
	}
	host, err := hostAddress()
	if err != nil {
		return err
	}
	return spawn(dir, "kubelet", filepath.Join(dir, "bin", "kubelet"),
		"--config="+filepath.Join(nd, "kubelet.yaml"),
		"--kubeconfig="+filepath.Join(nd, "kubelet.kubeconfig"),
		"--root-dir="+kubeletRootDir(dir),
		"--hostname-override="+nodeName,
		"--node-ip="+host.String(),
		"--v=2",
	)
}

// kubeletCommand stops the node's kubelet (stop-kubelet, restart-kubelet)
// and starts it again with the same configuration (start-kubelet,
// restart-kubelet), returning once the node is Ready with a heartbeat of the
// new kubelet (the API keeps the old condition for a while after a stop).
func kubeletCommand(command string, args []string) error {
	if len(args) != 1 {
		usage()
	}
	dir, err := filepath.Abs(args[0])
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(hostStateDir(dir), "state.json")); err != nil {
		return fmt.Errorf("no node in %s (start --node)", dir)
	}
	pid := readPid(dir, "kubelet")
	up := pid > 0 && ours(pid, dir)
	if command != "start-kubelet" && up {
		if err := terminate(pid); err != nil {
			return err
		}
		_ = os.Remove(pidFile(dir, "kubelet"))
		up = false
	}
	if command == "stop-kubelet" || up {
		return nil
	}
	// Heartbeats have whole seconds: starting on a new second tells the new
	// kubelet's from the old one's.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	began := time.Now()
	if err := spawnKubelet(dir, true); err != nil {
		return err
	}
	admin, err := adminClientOf(dir)
	if err != nil {
		return err
	}
	server, err := os.ReadFile(filepath.Join(dir, "server"))
	if err != nil {
		return err
	}
	since := began.Truncate(time.Second)
	if err := waitFor(dir, "kubelet", func() bool { return nodeReady(admin, strings.TrimSpace(string(server)), since) }); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "testcluster: kubelet started, node %s Ready after %.1f s\n", nodeName, time.Since(began).Seconds())
	return nil
}

// waitFor polls ready until it holds, failing early when process name exits.
func waitFor(dir, name string, ready func() bool) error {
	deadline := time.Now().Add(nodeTimeout)
	for !ready() {
		if !alive(readPid(dir, name)) {
			return fmt.Errorf("%s exited during start:\n%s", name, logTail(dir, name))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v:\n%s", name, nodeTimeout, logTail(dir, name))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func adminClientOf(dir string) (*http.Client, error) {
	var p pkiFiles
	var err error
	if p.caPEM, err = os.ReadFile(filepath.Join(dir, "pki", "ca.crt")); err != nil {
		return nil, err
	}
	if p.adminCertPEM, err = os.ReadFile(filepath.Join(dir, "pki", "admin.crt")); err != nil {
		return nil, err
	}
	if p.adminKeyPEM, err = os.ReadFile(filepath.Join(dir, "pki", "admin.key")); err != nil {
		return nil, err
	}
	return p.adminClient(), nil
}

func apiGet(client *http.Client, url string) ([]byte, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := client.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	return body.Bytes(), resp.StatusCode == http.StatusOK
}

func apiOK(client *http.Client, url string) bool {
	_, ok := apiGet(client, url)
	return ok
}

// nodeReady reports whether the node's Ready condition is True, with a
// heartbeat at or after since.
func nodeReady(client *http.Client, server string, since time.Time) bool {
	body, ok := apiGet(client, server+"/api/v1/nodes/"+nodeName)
	if !ok {
		return false
	}
	var node struct {
		Status struct {
			Conditions []struct {
				Type, Status      string
				LastHeartbeatTime time.Time
			}
		}
	}
	if json.Unmarshal(body, &node) != nil {
		return false
	}
	for _, c := range node.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True" && !c.LastHeartbeatTime.Before(since.Truncate(time.Second))
		}
	}
	return false
}

func importImage(dir, archive string) error {
	out, err := exec.Command("ctr", "--address", containerdSocket(dir), "-n", "k8s.io", "images", "import", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("importing %s: %v: %s", archive, err, out)
	}
	return nil
}

// hostState is what start saw before the node touched the host.
type hostState struct {
	Sysctls  map[string]string
	Absent   []string // paths that did not exist (kubelet paths, kubepods cgroups)
	Netns    []string // entries of /run/netns
	ShimSock []string // entries of /run/containerd/s
}

func cgroupKubepods() []string {
	var dirs []string
	seen := map[string]bool{}
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		real, err := filepath.EvalSymlinks(filepath.Join("/sys/fs/cgroup", e.Name()))
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		if fi, err := os.Stat(real); err == nil && fi.IsDir() {
			dirs = append(dirs, filepath.Join(real, "kubepods"))
		}
	}
	return dirs
}

func listNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func saveHostState(dir string) error {
	s := hostState{Sysctls: map[string]string{}}
	for _, name := range nodeSysctls {
		if b, err := os.ReadFile("/proc/sys/" + name); err == nil {
			s.Sysctls[name] = strings.TrimSpace(string(b))
		}
	}
	for _, p := range append(append([]string{kubeletRootDir(dir)}, kubeletHostPaths...), cgroupKubepods()...) {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			s.Absent = append(s.Absent, p)
		}
	}
	s.Netns = listNames("/run/netns")
	s.ShimSock = listNames("/run/containerd/s")
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	hs := hostStateDir(dir)
	for _, t := range []string{"iptables", "ip6tables"} {
		out, err := exec.Command(t + "-save").Output()
		if err != nil {
			return fmt.Errorf("%s-save: %w", t, err)
		}
		if err := os.WriteFile(filepath.Join(hs, t), out, 0o600); err != nil {
			return err
		}
	}
	// iptables-nft creates the tables it needs: stop deletes the new ones left empty.
	if out, err := exec.Command("nft", "list", "tables").Output(); err == nil {
		if err := os.WriteFile(filepath.Join(hs, "nft-tables"), out, 0o600); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(hs, "state.json"), b, 0o600)
}

// stopNode stops the node of DIR and restores the host. A cluster without a
// node (no DIR/nodefs/host-state) is left to stop.
func stopNode(dir string) error {
	hs := hostStateDir(dir)
	b, err := os.ReadFile(filepath.Join(hs, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var state hostState
	if err := json.Unmarshal(b, &state); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(hs, "state.json"), err)
	}
	var errs []error
	halt := func(name string) {
		if pid := readPid(dir, name); pid > 0 && pid != os.Getpid() && ours(pid, dir) {
			if err := terminate(pid); err != nil {
				errs = append(errs, fmt.Errorf("%s (pid %d): %w", name, pid, err))
				return
			}
		}
		_ = os.Remove(pidFile(dir, name))
	}
	// The kubelet first, or it restarts what the rest removes.
	halt("kubelet")
	if alive(readPid(dir, "containerd")) {
		crictl := filepath.Join(dir, "bin", "crictl")
		for _, args := range [][]string{{"rmp", "--all", "--force"}, {"rm", "--all", "--force"}} {
			cmd := exec.Command(crictl, append([]string{"--config", filepath.Join(dir, "crictl.yaml")}, args...)...)
			if out, err := runWithTimeout(cmd, 60*time.Second); err != nil {
				fmt.Fprintf(os.Stderr, "testcluster: crictl %s: %v: %s\n", strings.Join(args, " "), err, out)
			}
		}
	}
	halt("kube-proxy")
	if out, err := runWithTimeout(exec.Command(filepath.Join(dir, "bin", "kube-proxy"), "--cleanup", "--v=0"), 60*time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: kube-proxy --cleanup: %v: %s\n", err, out)
	}
	halt("containerd")
	// What containerd leaves: containers (after a kill, or their shims
	// keep them), the shims, then their mounts.
	if out, err := exec.Command("runc", "--root", runcRoot(dir), "list", "-q").Output(); err == nil {
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("runc", "--root", runcRoot(dir), "delete", "--force", id).Run()
		}
	}
	killCgroupProcs()
	killMatching(nodeDir(dir))
	halt("kube-scheduler")
	halt("kube-controller-manager")

	errs = append(errs, unmountUnder(dir, state)...)
	errs = append(errs, deleteLinks()...)
	for _, t := range []string{"iptables", "ip6tables"} {
		if err := undoIptables(t, filepath.Join(hs, t)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := deleteNewEmptyTables(filepath.Join(hs, "nft-tables")); err != nil {
		errs = append(errs, err)
	}
	// CNI's result cache: ours and the loopback network's of our sandboxes
	// (a DEL removes them; a killed containerd never sent it).
	results, _ := filepath.Glob("/var/lib/cni/results/" + cniNetwork + "-*")
	for _, r := range results {
		id := strings.TrimPrefix(filepath.Base(r), cniNetwork+"-")
		if i := strings.LastIndexByte(id, '-'); i > 0 {
			_ = os.Remove("/var/lib/cni/results/cni-loopback-" + id[:i] + "-lo")
		}
		_ = os.Remove(r)
	}
	for _, id := range listNames(filepath.Join(nodeDir(dir), "containerd", "state", "io.containerd.grpc.v1.cri", "sandboxes")) {
		_ = os.Remove("/var/lib/cni/results/cni-loopback-" + id + "-lo")
	}
	for _, p := range state.Absent {
		if strings.HasPrefix(p, "/sys/fs/cgroup/") {
			if err := removeCgroup(p); err != nil {
				errs = append(errs, err)
			}
		} else if !mountedUnder(p) {
			_ = os.RemoveAll(p)
		}
	}
	if contains(kubeletHostPaths, "/var/log/containers") && !contains(state.Absent, "/var/log/containers") {
		// Only the kubelet's links into our pod logs.
		links, _ := filepath.Glob("/var/log/containers/*.log")
		for _, l := range links {
			if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, nodeDir(dir)) {
				_ = os.Remove(l)
			}
		}
	}
	for _, name := range listNames("/run/containerd/s") {
		if !contains(state.ShimSock, name) {
			_ = os.Remove(filepath.Join("/run/containerd/s", name))
		}
	}
	for name, value := range state.Sysctls {
		b, err := os.ReadFile("/proc/sys/" + name)
		if err == nil && strings.TrimSpace(string(b)) != value {
			if err := os.WriteFile("/proc/sys/"+name, []byte(value), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restoring %s: %w", name, err))
			}
		}
	}
	for _, f := range []string{"node", "containerd", "crictl.yaml"} {
		_ = os.Remove(filepath.Join(dir, f))
	}
	err = errors.Join(errs...)
	if err == nil {
		// The host is clean: a second stop has nothing to undo.
		err = os.RemoveAll(hs)
	}
	if err == nil {
		unlockHost(dir)
	}
	return err
}

// hostLock names the DIR of the node cluster that owns this host: the bridge,
// the iptables chains, the kubepods cgroups and the CNI results are the
// host's, and a second node's stop would tear down the first one's pods.
const hostLock = "/run/resourceslice-controller-test-node"

// lockHost makes DIR the owner of the host's node, unless another DIR whose
// node was never stopped (its host state is still there) owns it.
func lockHost(dir string) error {
	// A kubelet of another node cluster (one started before this lock existed).
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte("/nodefs/kubelet.yaml")) {
			continue
		}
		if !bytes.Contains(cmdline, []byte(nodeDir(dir)+"/")) {
			return fmt.Errorf("another node cluster's kubelet runs on this host (pid %s: %s); one node cluster runs at a time",
				e.Name(), bytes.ReplaceAll(cmdline, []byte{0}, []byte(" ")))
		}
	}
	for try := 0; try < 2; try++ {
		f, err := os.OpenFile(hostLock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			_, err = f.WriteString(dir + "\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return err
		}
		if !errors.Is(err, os.ErrExist) {
			return err
		}
		b, err := os.ReadFile(hostLock)
		if err != nil {
			continue // removed meanwhile
		}
		owner := strings.TrimSpace(string(b))
		if owner != dir {
			if _, err := os.Stat(filepath.Join(hostStateDir(owner), "state.json")); err == nil {
				return fmt.Errorf("the node cluster in %s owns this host (%s); one node cluster runs at a time: stop it first (test/cluster/stop %s)", owner, hostLock, owner)
			}
		}
		// Our own, or an owner that was stopped or deleted: stale.
		_ = os.Remove(hostLock)
	}
	return fmt.Errorf("could not take %s", hostLock)
}

func unlockHost(dir string) {
	if b, err := os.ReadFile(hostLock); err == nil && strings.TrimSpace(string(b)) == dir {
		_ = os.Remove(hostLock)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func runWithTimeout(cmd *exec.Cmd, timeout time.Duration) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.Bytes(), err
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return out.Bytes(), fmt.Errorf("timed out after %v", timeout)
	}
}

// killCgroupProcs kills every process left in a kubepods cgroup (containers
// whose runtime is gone).
func killCgroupProcs() {
	for _, root := range cgroupKubepods() {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

// killMatching kills the processes whose command line names path (the
// containerd shims of this node) and waits for them.
func killMatching(path string) {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(cmdline, []byte(path)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		deadline := time.Now().Add(stopTimeout)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// mounts lists the mount points of this mount namespace, unescaped.
func mounts() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var points []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) > 4 {
			p := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(fields[4])
			points = append(points, p)
		}
	}
	return points
}

func under(path, root string) bool {
	return path == root || strings.HasPrefix(path, root+"/")
}

func mountedUnder(root string) bool {
	for _, m := range mounts() {
		if under(m, root) {
			return true
		}
	}
	return false
}

// unmountUnder unmounts, deepest first, what the node mounted: everything
// under DIR/nodefs and the kubelet's fixed paths, and the network namespaces
// new in /run/netns (which it then removes).
func unmountUnder(dir string, state hostState) []error {
	roots := append([]string{nodeDir(dir), kubeletRootDir(dir)}, kubeletHostPaths...)
	isOurs := func(m string) bool {
		for _, r := range roots {
			if under(m, r) {
				return true
			}
		}
		return strings.HasPrefix(m, "/run/netns/") && !contains(state.Netns, filepath.Base(m))
	}
	for pass := 0; pass < 5; pass++ {
		var ours []string
		for _, m := range mounts() {
			if isOurs(m) {
				ours = append(ours, m)
			}
		}
		if len(ours) == 0 {
			break
		}
		sort.Slice(ours, func(i, j int) bool { return len(ours[i]) > len(ours[j]) })
		for _, m := range ours {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	var errs []error
	for _, m := range mounts() {
		if isOurs(m) {
			errs = append(errs, fmt.Errorf("still mounted: %s", m))
		}
	}
	for _, name := range listNames("/run/netns") {
		if !contains(state.Netns, name) && strings.HasPrefix(name, "cni-") {
			_ = os.Remove(filepath.Join("/run/netns", name))
		}
	}
	return errs
}

// deleteLinks deletes the bridge and the veths still attached to it.
func deleteLinks() []error {
	if _, err := net.InterfaceByName(bridgeName); err != nil {
		return nil
	}
	var errs []error
	out, _ := exec.Command("ip", "-o", "link", "show", "master", bridgeName).Output()
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		name := strings.TrimSuffix(fields[1], ":")
		if i := strings.IndexByte(name, '@'); i >= 0 {
			name = name[:i]
		}
		_ = exec.Command("ip", "link", "delete", name).Run()
	}
	if out, err := exec.Command("ip", "link", "delete", bridgeName).CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("ip link delete %s: %v: %s", bridgeName, err, out))
	}
	return errs
}

// ruleset is one table of an iptables-save output: its chains and rules.
type ruleset struct {
	chains []string
	rules  []string // "-A CHAIN ..." lines
}

func parseSave(b []byte) map[string]*ruleset {
	tables := map[string]*ruleset{}
	var cur *ruleset
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			cur = &ruleset{}
			tables[line[1:]] = cur
		case cur != nil && strings.HasPrefix(line, ":"):
			cur.chains = append(cur.chains, strings.Fields(line[1:])[0])
		case cur != nil && strings.HasPrefix(line, "-A "):
			cur.rules = append(cur.rules, line)
		}
	}
	return tables
}

// ourRule tells the kubelet's, kube-proxy's and the CNI plugins' rules and
// chains from anyone else's.
func ourRule(s string) bool {
	return strings.Contains(s, "KUBE-") || strings.Contains(s, "CNI-") ||
		strings.Contains(s, bridgeName) || strings.Contains(s, "10.244.")
}

// undoIptables deletes the rules and chains (of the node's kinds) that are
// new since the saved output of TOOL-save.
func undoIptables(tool, saved string) error {
	b, err := os.ReadFile(saved)
	if err != nil {
		return err
	}
	before := parseSave(b)
	now, err := exec.Command(tool + "-save").Output()
	if err != nil {
		return fmt.Errorf("%s-save: %w", tool, err)
	}
	var script strings.Builder
	for table, rs := range parseSave(now) {
		old := before[table]
		if old == nil {
			old = &ruleset{}
		}
		var newChains []string
		for _, c := range rs.chains {
			if !contains(old.chains, c) && ourRule(c) {
				newChains = append(newChains, c)
			}
		}
		var lines []string
		for _, r := range rs.rules {
			chain := strings.Fields(r)[1]
			if !contains(newChains, chain) && !contains(old.rules, r) && ourRule(r) {
				lines = append(lines, "-D"+strings.TrimPrefix(r, "-A"))
			}
		}
		for _, c := range newChains {
			lines = append(lines, "-F "+c)
		}
		for _, c := range newChains {
			lines = append(lines, "-X "+c)
		}
		if len(lines) > 0 {
			fmt.Fprintf(&script, "*%s\n%s\nCOMMIT\n", table, strings.Join(lines, "\n"))
		}
	}
	if script.Len() == 0 {
		return nil
	}
	cmd := exec.Command(tool+"-restore", "--noflush")
	cmd.Stdin = strings.NewReader(script.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s-restore: %v: %s\n%s", tool, err, out, script.String())
	}
	return nil
}

// removeCgroup removes a cgroup tree, leaves first.
func removeCgroup(root string) error {
	var dirs []string
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	var last error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
			last = fmt.Errorf("rmdir %s: %w", dirs[i], err)
		}
	}
	return last
}

// deleteNewEmptyTables deletes the iptables-nft tables that did not exist at
// start (as listed by `nft list tables` in saved) and hold no rules and no
// chains but the built-in ones now.
func deleteNewEmptyTables(saved string) error {
	before, err := os.ReadFile(saved)
	if err != nil {
		return nil // no nft at start: nothing to compare with
	}
	now, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil
	}
	builtin := []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}
	tools := map[string]string{"ip": "iptables-save", "ip6": "ip6tables-save"}
	var errs []error
	for _, line := range strings.Split(string(now), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "table" || tools[f[1]] == "" || bytes.Contains(before, []byte(line+"\n")) {
			continue
		}
		out, err := exec.Command(tools[f[1]], "-t", f[2]).Output()
		if err != nil {
			continue
		}
		rs := parseSave(out)[f[2]]
		empty := rs != nil && len(rs.rules) == 0
		for _, c := range rsChains(rs) {
			empty = empty && contains(builtin, c)
		}
		if empty {
			if out, err := exec.Command("nft", "delete", "table", f[1], f[2]).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("nft delete table %s %s: %v: %s", f[1], f[2], err, out))
			}
		}
	}
	return errors.Join(errs...)
}

func rsChains(rs *ruleset) []string {
	if rs == nil {
		return nil
	}
	return rs.chains
}
