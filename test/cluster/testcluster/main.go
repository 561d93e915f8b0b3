// Command testcluster starts and stops a real kube-apiserver and etcd on
// loopback for the project's tests. It only orchestrates: the servers are the
// upstream binaries built by ../build from their published Go modules.
//
//	testcluster start --bin BINDIR [--owner-pid PID] [--feature-gates=A=true,B=false]
//	                  [--apiserver-arg=--flag=value]... [--node [--kubelet-root-dir PATH]] DIR
//	testcluster stop DIR
//	testcluster restart-kubelet|stop-kubelet|start-kubelet DIR
//	testcluster image --name REF --out ARCHIVE BINARY [ARG]...
//
// start returns once /readyz answers and DIR/kubeconfig (admin) is written;
// DIR/bin links to BINDIR, so that stop and kubectl use the same release;
// the servers keep running in their own session until stop. With --owner-pid
// a watchdog stops the cluster when that process dies, so a crashed test
// suite leaves nothing behind.
//
// With --node the cluster also gets a node that runs pods (see node.go):
// containerd, kube-controller-manager, kube-scheduler, kube-proxy and a
// kubelet registering Node node-a; stop then undoes what they did to the
// host. image packs a static binary into an image archive (image.go).
//
// Extra kube-apiserver flags come from the environment variable
// TESTCLUSTER_APISERVER_ARGS (separated by spaces, so that a whole test run
// can use other flags without touching any test), then from --feature-gates
// and --apiserver-arg in command-line order. They follow the defaults: for
// most flags the last occurrence wins; list and map flags
// (--enable-admission-plugins, --feature-gates) add to earlier occurrences.
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Identities written to DIR/tokens.csv. Tests use them to act as an admin, as
// a user with no rights at all, and as the kubelet of two nodes.
var identities = []struct {
	name, user, uid, groups string
}{
	{"admin", "admin", "admin-uid", "system:masters"},
	{"nobody", "nobody", "nobody-uid", ""},
	{"node-a", "system:node:node-a", "node-a-uid", "system:nodes"},
	{"node-b", "system:node:node-b", "node-b-uid", "system:nodes"},
}

// The processes a cluster consists of, in start order; stop goes in reverse.
var components = []string{"etcd", "kube-apiserver"}

const (
	readyTimeout = 120 * time.Second
	stopTimeout  = 15 * time.Second
	startTries   = 3
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "start":
		err = startCommand(os.Args[2:])
	case "stop":
		err = stopCommand(os.Args[2:])
	case "watchdog":
		err = watchdogCommand(os.Args[2:])
	case "restart-kubelet", "stop-kubelet", "start-kubelet":
		err = kubeletCommand(os.Args[1], os.Args[2:])
	case "image":
		err = imageCommand(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testcluster start --bin BINDIR [--owner-pid PID] [--feature-gates=GATES] [--apiserver-arg=FLAG]... [--node [--kubelet-root-dir PATH]] DIR | testcluster stop DIR | testcluster restart-kubelet|stop-kubelet|start-kubelet DIR | testcluster image --name REF --out ARCHIVE BINARY [ARG]...")
	os.Exit(2)
}

// apiserverArgsVariable names the environment variable with extra
// kube-apiserver flags for every cluster started.
const apiserverArgsVariable = "TESTCLUSTER_APISERVER_ARGS"

func startCommand(args []string) error {
	fs := flag.NewFlagSet("start", flag.ExitOnError)
	bin := fs.String("bin", "", "folder holding the etcd and kube-apiserver binaries")
	owner := fs.Int("owner-pid", 0, "stop the cluster when this process exits (0: never)")
	withNode := fs.Bool("node", false, "also run a node (containerd, kubelet, kube-proxy) with the controller manager and scheduler")
	kubeletRoot := fs.String("kubelet-root-dir", "", "with --node: the kubelet's --root-dir (default DIR/nodefs/kubelet); /var/lib/kubelet for DRA drivers whose sockets are there")
	var extra []string
	for _, arg := range strings.Fields(os.Getenv(apiserverArgsVariable)) {
		if err := checkApiserverArg(arg); err != nil {
			return fmt.Errorf("%s: %w", apiserverArgsVariable, err)
		}
		extra = append(extra, arg)
	}
	fs.Func("apiserver-arg", "an extra kube-apiserver flag, passed as is (repeatable): --apiserver-arg=--watch-cache=false",
		func(arg string) error {
			if err := checkApiserverArg(arg); err != nil {
				return err
			}
			extra = append(extra, arg)
			return nil
		})
	fs.Func("feature-gates", "kube-apiserver feature gates, as its --feature-gates: A=true,B=false",
		func(gates string) error {
			extra = append(extra, "--feature-gates="+gates)
			return nil
		})
	_ = fs.Parse(args)
	if fs.NArg() != 1 || *bin == "" {
		usage()
	}
	dir, err := filepath.Abs(fs.Arg(0))
	if err != nil {
		return err
	}
	if *bin, err = filepath.Abs(*bin); err != nil {
		return err
	}
	if running(dir) {
		return fmt.Errorf("a cluster is already running in %s; stop it first", dir)
	}
	// Ports are picked by binding port 0 and releasing it, so another process
	// can take one in between; a start that loses that race is retried.
	for try := 1; ; try++ {
		err = start(dir, *bin, extra, *withNode)
		if err == nil && *withNode {
			err = startNode(dir, *bin, *kubeletRoot)
		}
		if err == nil {
			break
		}
		_ = stop(dir)
		if try == startTries || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
		fmt.Fprintf(os.Stderr, "testcluster: start failed (%v), retrying\n", err)
	}
	if *owner > 0 {
		if err := spawnWatchdog(dir, *owner); err != nil {
			_ = stop(dir)
			return err
		}
	}
	return nil
}

// checkApiserverArg refuses what kube-apiserver would take as a positional
// argument, typically a flag whose leading dashes were forgotten.
func checkApiserverArg(arg string) error {
	if !strings.HasPrefix(arg, "--") {
		return fmt.Errorf("kube-apiserver flag %q does not start with --", arg)
	}
	return nil
}

func start(dir, bin string, apiserverArgs []string, withNode bool) error {
	// Every start is a fresh cluster: old data, keys and logs go.
	for _, sub := range []string{"etcd-data", "pki", "logs", "tokens"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return err
		}
	}
	for _, sub := range []string{"pki", "logs", "tokens"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return err
		}
	}
	// stop and kubectl run the binaries of the release this cluster runs.
	if err := os.Remove(filepath.Join(dir, "bin")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Symlink(bin, filepath.Join(dir, "bin")); err != nil {
		return err
	}
	var host net.IP
	var err error
	if withNode {
		// Pods reach the API server through the kubernetes Service, whose
		// endpoint must be an address they can route to.
		if host, err = hostAddress(); err != nil {
			return err
		}
	}
	pki, err := writePKI(filepath.Join(dir, "pki"), host)
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := writeTokens(dir); err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdClient := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	etcdPeer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	server := fmt.Sprintf("https://127.0.0.1:%d", ports[2])

	// etcd first: the API server gives up if its storage is not there.
	err = spawn(dir, "etcd", filepath.Join(bin, "etcd"),
		"--name=default",
		"--data-dir="+filepath.Join(dir, "etcd-data"),
		"--listen-client-urls="+etcdClient,
		"--advertise-client-urls="+etcdClient,
		"--listen-peer-urls="+etcdPeer,
		"--initial-advertise-peer-urls="+etcdPeer,
		"--initial-cluster=default="+etcdPeer,
		// Tests never need durability across a power cut; fsync is the
		// slowest part of every write.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	if err := waitReady(dir, "etcd", etcdClient+"/health", http.DefaultClient); err != nil {
		return err
	}

	p := func(name string) string { return filepath.Join(dir, "pki", name) }
	flags := []string{
		"--etcd-servers=" + etcdClient,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// There are no other control-plane hosts to publish in the
		// kubernetes Service's endpoints, and loopback may not be published.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--tls-cert-file=" + p("serving.crt"),
		"--tls-private-key-file=" + p("serving.key"),
		"--client-ca-file=" + p("ca.crt"),
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p("sa.key"),
		"--service-account-signing-key-file=" + p("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--profiling=false",
		"--v=1",
	}
	if withNode {
		flags = append(flags, nodeApiserverFlags(dir, host)...)
	}
	err = spawn(dir, "kube-apiserver", filepath.Join(bin, "kube-apiserver"), append(flags, apiserverArgs...)...)
	if err != nil {
		return err
	}
	if err := waitReady(dir, "kube-apiserver", server+"/readyz", pki.adminClient()); err != nil {
		return err
	}
	if err := writeKubeconfig(dir, server, pki); err != nil {
		return err
	}
	// Tests that need etcd itself (to compact it, say) find it here.
	if err := os.WriteFile(filepath.Join(dir, "etcd"), []byte(etcdClient+"\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "server"), []byte(server+"\n"), 0o644)
}

// spawn starts a server in a session of its own, logging to DIR/logs.
func spawn(dir, name, path string, args ...string) error {
	logf, err := os.Create(filepath.Join(dir, "logs", name+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	// Release: the process outlives this command; stop finds it by pid file.
	_ = cmd.Process.Release()
	return os.WriteFile(pidFile(dir, name), []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

func waitReady(dir, name, url string, client *http.Client) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		if !alive(readPid(dir, name)) {
			return fmt.Errorf("%s exited during start:\n%s", name, logTail(dir, name))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				cancel()
				return nil
			}
		}
		cancel()
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v:\n%s", name, readyTimeout, logTail(dir, name))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func logTail(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "logs", name+".log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// pkiFiles holds what the kubeconfig and the readiness probe need.
type pkiFiles struct {
	caPEM, adminCertPEM, adminKeyPEM []byte
}

func (p pkiFiles) adminClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	cert, _ := tls.X509KeyPair(p.adminCertPEM, p.adminKeyPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
}

// writePKI writes a CA, the API server's serving certificate, an admin client
// certificate (system:masters) and the service-account signing key. With a
// host address (node mode) the serving certificate also names it, and the
// API server gets a client certificate for the kubelet (logs, exec).
func writePKI(dir string, host net.IP) (pkiFiles, error) {
	caKey, caPEM, caCert, err := newCert(nil, nil, x509.Certificate{
		Subject:               pkix.Name{CommonName: "resourceslice-controller-test-ca"},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	})
	if err != nil {
		return pkiFiles{}, err
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.0.0.1")}
	if host != nil {
		ips = append(ips, host)
	}
	servingKey, servingPEM, _, err := newCert(caKey, caCert, x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return pkiFiles{}, err
	}
	adminKey, adminPEM, _, err := newCert(caKey, caCert, x509.Certificate{
		Subject:     pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return pkiFiles{}, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pkiFiles{}, err
	}
	files := map[string][]byte{
		"ca.crt":      caPEM,
		"serving.crt": servingPEM,
		"serving.key": keyPEM(servingKey),
		"admin.crt":   adminPEM,
		"admin.key":   keyPEM(adminKey),
		"sa.key":      keyPEM(saKey),
	}
	if host != nil {
		kubeletKey, kubeletPEM, _, err := newCert(caKey, caCert, x509.Certificate{
			Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		if err != nil {
			return pkiFiles{}, err
		}
		files["kubelet-client.crt"] = kubeletPEM
		files["kubelet-client.key"] = keyPEM(kubeletKey)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return pkiFiles{}, err
		}
	}
	return pkiFiles{caPEM: caPEM, adminCertPEM: adminPEM, adminKeyPEM: keyPEM(adminKey)}, nil
}

func newCert(signerKey *ecdsa.PrivateKey, signer *x509.Certificate, tmpl x509.Certificate) (*ecdsa.PrivateKey, []byte, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(10 * 365 * 24 * time.Hour)
	if signer == nil {
		signer, signerKey = &tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert, nil
}

func keyPEM(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// writeTokens writes the static token file and one file per identity under
// DIR/tokens, so tests can pick an identity by name.
func writeTokens(dir string) error {
	var csv bytes.Buffer
	for _, id := range identities {
		raw := make([]byte, 24)
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		token := base64.RawURLEncoding.EncodeToString(raw)
		fmt.Fprintf(&csv, "%s,%s,%s,%q\n", token, id.user, id.uid, id.groups)
		if err := os.WriteFile(filepath.Join(dir, "tokens", id.name), []byte(token+"\n"), 0o600); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "tokens.csv"), csv.Bytes(), 0o600)
}

func writeKubeconfig(dir, server string, p pkiFiles) error {
	b64 := base64.StdEncoding.EncodeToString
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: test
  context:
    cluster: test
    user: admin
    namespace: default
current-context: test
`, server, b64(p.caPEM), b64(p.adminCertPEM), b64(p.adminKeyPEM))
	return os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte(cfg), 0o600)
}

func stopCommand(args []string) error {
	if len(args) != 1 {
		usage()
	}
	dir, err := filepath.Abs(args[0])
	if err != nil {
		return err
	}
	return stop(dir)
}

// stop ends every process of the cluster in DIR and waits until they are
// gone. Stopping a folder with nothing running succeeds.
func stop(dir string) error {
	// The node goes first: its kubelet and controllers need the API server
	// until they are gone, and the host is restored before the servers stop.
	errs := []error{stopNode(dir)}
	names := append([]string{"watchdog"}, components...)
	for i := len(names) - 1; i >= 0; i-- {
		name := names[i]
		pid := readPid(dir, name)
		if pid > 0 && pid != os.Getpid() && ours(pid, dir) {
			if err := terminate(pid); err != nil {
				errs = append(errs, fmt.Errorf("%s (pid %d): %w", name, pid, err))
				continue
			}
		}
		_ = os.Remove(pidFile(dir, name))
	}
	return errors.Join(errs...)
}

func terminate(pid int) error {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(stopTimeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(stopTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func running(dir string) bool {
	for _, name := range append(append([]string{}, components...), nodeComponents...) {
		if pid := readPid(dir, name); pid > 0 && ours(pid, dir) {
			return true
		}
	}
	return false
}

func pidFile(dir, name string) string { return filepath.Join(dir, name+".pid") }

func readPid(dir, name string) int {
	b, err := os.ReadFile(pidFile(dir, name))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// alive reports whether pid is a process that has not exited. A zombie (a
// child of ours that exited) counts as gone.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// ours guards against a recycled pid: every process of a cluster has DIR in
// its command line.
func ours(pid int, dir string) bool {
	if !alive(pid) {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(cmdline, []byte(dir))
}

func spawnWatchdog(dir string, owner int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "watchdog", dir, strconv.Itoa(owner))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return os.WriteFile(pidFile(dir, "watchdog"), []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

// watchdogCommand stops the cluster when its owner exits without stopping it.
func watchdogCommand(args []string) error {
	if len(args) != 2 {
		usage()
	}
	dir := args[0]
	owner, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	for {
		time.Sleep(time.Second)
		if !running(dir) {
			return nil
		}
		if !alive(owner) {
			fmt.Fprintf(os.Stderr, "testcluster: owner %d exited, stopping the cluster in %s\n", owner, dir)
			return stop(dir)
		}
	}
}
