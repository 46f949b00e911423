package deploy

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// TestChartEnvStartsServe runs kvlease-server serve (the image's binary,
// built from this repository)
// with the environment of each rendered engine container, the Downward API
// and the Secret resolved as the kubelet would, and listen ports moved to
// free ones: every KVLEASE_* variable the chart sets must be a serve flag
// with a valid value, or serve refuses to start.
func TestChartEnvStartsServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs kvlease")
	}
	bin := filepath.Join(t.TempDir(), "kvlease-server")
	build := exec.Command("go", "build", "-o", bin, "./cmd/kvlease-server")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	leases := map[string]any{"kvEvents": map[string]any{"leaseTopic": "kvlease-leases@$(POD_IP):8000"}}
	spill := map[string]any{"prefill": map[string]any{"offload": "cpu:64MiB", "leaseSpill": "pressure"}}
	tlsOn := map[string]any{"tls": map[string]any{"secretName": "kv-tls", "clientCertReqs": 1}}
	for _, values := range []map[string]any{nil, {"topology": "llm-d"}, {"mode": "aggregated"}, leases, spill, tlsOn} {
		r := mustRender(t, values)
		for _, name := range keys(r.deployments) {
			if strings.HasSuffix(name, "-proxy") {
				continue
			}
			t.Run(name, func(t *testing.T) { runWithEnv(t, bin, r.deployments[name]) })
		}
	}
}

func runWithEnv(t *testing.T, bin string, d *appsv1.Deployment) {
	c := container(d, "kvlease")
	vars := map[string]string{}
	var envList []string
	var tlsDir string
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			v = "127.0.0.1"
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			v = strings.Repeat("s3", 16)
		case e.ValueFrom != nil:
			t.Fatalf("env %s from %+v: not resolved by this test", e.Name, e.ValueFrom)
		}
		// $(VAR) expansion, as the kubelet does for variables defined
		// before.
		for k, val := range vars {
			v = strings.ReplaceAll(v, "$("+k+")", val)
		}
		switch e.Name {
		case "KVLEASE_HOST":
			v = "127.0.0.1"
		case "KVLEASE_PORT", "KVLEASE_TRANSFER_PORT":
			v = "0"
		case "KVLEASE_KV_EVENTS_ENDPOINT", "KVLEASE_KV_EVENTS_REPLAY_ENDPOINT":
			v = "tcp://127.0.0.1:0"
		}
		if f, ok := strings.CutPrefix(v, "/etc/kvlease/tls/"); ok { // the Secret's volume
			if tlsDir == "" {
				tlsDir = tlsSecret(t)
			}
			v = filepath.Join(tlsDir, f)
		}
		vars[e.Name] = v
		envList = append(envList, e.Name+"="+v)
	}
	cmd := exec.Command(bin, c.Args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, envList...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		if !ok || !strings.HasPrefix(l, "kvlease serve on ") {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("serve with the chart's environment did not start: %q\n%s", l, stderr.String())
		}
		if !strings.Contains(l, "kv events on") || !strings.Contains(l, "role "+vars["KVLEASE_ROLE"]) ||
			strings.HasPrefix(l, "kvlease serve on https://") != (tlsDir != "") {
			t.Errorf("startup line %q", l)
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("serve did not start within 60 s\n%s", stderr.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v\n%s", err, stderr.String())
	}
}

// tlsSecret writes what a kubernetes.io/tls Secret with ca.crt holds into
// a directory: a self-signed certificate for 127.0.0.1 (its own CA).
func tlsSecret(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kvlease chart test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for name, b := range map[string][]byte{"tls.crt": cert, "ca.crt": cert,
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
