// Command probe is the test node's image for checks from inside a pod: it GETs
// each URL given and exits 0 when every answer is a 2xx, else 1 (printing what
// it got). It authenticates with the pod's service-account token and verifies
// the server with the service account's CA when they are mounted, so a Job
// running `probe https://10.0.0.1/readyz` proves that a pod reaches the API
// server through the Service network. With -serve ADDR it instead answers
// every request with 200 and the pod's hostname, for Service tests; with
// -sleep it just waits (a long-running pod for exec and logs).
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	serve := flag.String("serve", "", "answer HTTP on this address (e.g. :8080) instead of probing")
	sleep := flag.Bool("sleep", false, "wait for SIGTERM instead of probing")
	tries := flag.Int("tries", 30, "attempts per URL, one second apart")
	flag.Parse()
	switch {
	case *serve != "":
		host, _ := os.Hostname()
		fmt.Printf("probe: serving on %s as %s\n", *serve, host)
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(w, host)
		})
		err := http.ListenAndServe(*serve, nil)
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	case *sleep:
		fmt.Println("probe: sleeping")
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
		<-c
		return
	}
	client := &http.Client{Timeout: 5 * time.Second}
	tlsConfig := &tls.Config{}
	if ca, err := os.ReadFile(saDir + "/ca.crt"); err == nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		tlsConfig.RootCAs = pool
	}
	client.Transport = &http.Transport{TLSClientConfig: tlsConfig}
	token, _ := os.ReadFile(saDir + "/token")
	failed := false
	for _, url := range flag.Args() {
		if !get(client, url, strings.TrimSpace(string(token)), *tries) {
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func get(client *http.Client, url, token string, tries int) bool {
	for i := 1; ; i++ {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "probe:", err)
			return false
		}
		if token != "" && strings.HasPrefix(url, "https:") {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			fmt.Printf("probe: GET %s: %s %s\n", url, resp.Status, strings.TrimSpace(string(body)))
			if resp.StatusCode/100 == 2 {
				return true
			}
		} else {
			fmt.Printf("probe: GET %s: %v\n", url, err)
		}
		if i >= tries {
			return false
		}
		time.Sleep(time.Second)
	}
}
