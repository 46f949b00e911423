package deploy

import (
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// checkEngine checks what every engine pod must have in llm-d's
// conventions: labels, probes, ports, the secret, the Downward API
// advertise host, the KV events and a grace period longer than the drain.
func checkEngine(t *testing.T, r *rendered, d *appsv1.Deployment, llmdRole, kvleaseRole string, enginePort int32) {
	t.Helper()
	pod := d.Spec.Template
	if pod.Labels["llm-d.ai/role"] != llmdRole || pod.Labels["llm-d.ai/inference-serving"] != "true" {
		t.Errorf("%s: pod labels %v, want llm-d.ai/role=%s and llm-d.ai/inference-serving=true", d.Name, pod.Labels, llmdRole)
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if pod.Labels[k] != v {
			t.Errorf("%s: selector %s=%s does not match its pods", d.Name, k, v)
		}
	}
	c := container(d, "kvlease")
	if c == nil {
		t.Fatalf("%s: no kvlease container", d.Name)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("%s: args %v, want serve", d.Name, c.Args)
	}
	want := map[string]string{"KVLEASE_ROLE": kvleaseRole, "KVLEASE_HOST": "0.0.0.0",
		"KVLEASE_PORT": itoa(enginePort), "KVLEASE_KV_EVENTS_ENDPOINT": "tcp://*:5557",
		"KVLEASE_KV_EVENTS_REPLAY_ENDPOINT": "tcp://*:5558", "KVLEASE_KV_EVENTS_TOPIC": "kv@$(POD_IP):8000@kvlease-tiny"}
	for k, v := range want {
		if e := env(c, k); e == nil || e.Value != v {
			t.Errorf("%s: env %s = %+v, want %q", d.Name, k, e, v)
		}
	}
	// The advertise host and the topic's pod IP come from the Downward
	// API; POD_IP is defined before the topic that expands it.
	for _, k := range []string{"KVLEASE_ADVERTISE_HOST", "POD_IP"} {
		e := env(c, k)
		if e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
			t.Errorf("%s: %s is not the pod IP from the Downward API: %+v", d.Name, k, e)
		}
	}
	if slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_IP" }) >
		slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "KVLEASE_KV_EVENTS_TOPIC" }) {
		t.Errorf("%s: POD_IP defined after the topic that expands it", d.Name)
	}
	// The secret: a secretKeyRef to a key that the rendered Secret has.
	e := env(c, "KVLEASE_CLUSTER_SECRET")
	if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.Fatalf("%s: KVLEASE_CLUSTER_SECRET is not from a Secret: %+v", d.Name, e)
	}
	ref := e.ValueFrom.SecretKeyRef
	if s := r.secrets[ref.Name]; s == nil {
		t.Errorf("%s: secret %q not rendered (have %v)", d.Name, ref.Name, keys(r.secrets))
	} else if v := s.Data[ref.Key]; len(v) < 16 {
		t.Errorf("%s: secret %s key %s holds %d bytes, want at least 16", d.Name, ref.Name, ref.Key, len(v))
	}
	// Ports.
	if p := port(c, "http"); p != enginePort {
		t.Errorf("%s: http port %d, want %d", d.Name, p, enginePort)
	}
	if p := port(c, "kv-events"); p != 5557 {
		t.Errorf("%s: kv-events port %d", d.Name, p)
	}
	if p := port(c, "kv-replay"); p != 5558 {
		t.Errorf("%s: kv-replay port %d", d.Name, p)
	}
	if serves := kvleaseRole != "decode"; (port(c, "transfer") == 9000) != serves {
		t.Errorf("%s: transfer port %d (serves leases: %v)", d.Name, port(c, "transfer"), serves)
	}
	// Probes, as llm-d's: startup and readiness on /v1/models (startup
	// with a generous threshold), liveness on /health, on the engine.
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s: %s probe %+v, want GET %s on port http", d.Name, name, p, path)
		}
	}
	probe("startup", c.StartupProbe, "/v1/models")
	probe("readiness", c.ReadinessProbe, "/v1/models")
	probe("liveness", c.LivenessProbe, "/health")
	if c.StartupProbe != nil && c.StartupProbe.FailureThreshold*c.StartupProbe.PeriodSeconds < 300 {
		t.Errorf("%s: startup probe allows %d s, want at least 300", d.Name, c.StartupProbe.FailureThreshold*c.StartupProbe.PeriodSeconds)
	}
	// Graceful shutdown: the grace period exceeds --drain-timeout, and
	// the liveness probe does not kill a draining engine (/health 503).
	drain, err := time.ParseDuration(env(c, "KVLEASE_DRAIN_TIMEOUT").Value)
	if err != nil {
		t.Fatalf("%s: KVLEASE_DRAIN_TIMEOUT: %v", d.Name, err)
	}
	grace := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace == nil || time.Duration(*grace)*time.Second <= drain {
		t.Errorf("%s: terminationGracePeriodSeconds %v does not exceed --drain-timeout %v", d.Name, grace, drain)
	}
	if lp := c.LivenessProbe; lp != nil && time.Duration(lp.FailureThreshold*lp.PeriodSeconds)*time.Second <= drain {
		t.Errorf("%s: liveness fails after %d s, within the %v drain", d.Name, lp.FailureThreshold*lp.PeriodSeconds, drain)
	}
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("%s: pods may run as root", d.Name)
	}
}

func itoa(n int32) string {
	b, _ := yaml.Marshal(n)
	return strings.TrimSpace(string(b))
}

func TestChartProxyTopology(t *testing.T) {
	r := mustRender(t, nil)
	p, d, x := r.deployments["demo-kvlease-prefill"], r.deployments["demo-kvlease-decode"], r.deployments["demo-kvlease-proxy"]
	if p == nil || d == nil || x == nil || len(r.deployments) != 3 {
		t.Fatalf("rendered %s", r.kinds())
	}
	checkEngine(t, r, p, "prefill", "prefill", 8000)
	checkEngine(t, r, d, "decode", "decode", 8000)
	if len(d.Spec.Template.Spec.InitContainers) != 0 {
		t.Errorf("a sidecar on decode pods in the proxy topology")
	}
	if len(r.pools) != 0 || len(r.configMaps) != 0 || len(r.serviceMonitors) != 0 {
		t.Errorf("llm-d objects or a ServiceMonitor by default: %s", r.kinds())
	}
	// The proxy reaches the engines through their Services.
	pc := container(x, "proxy")
	var prefillURL, decodeURL string
	for _, a := range pc.Args {
		if v, ok := strings.CutPrefix(a, "--prefill="); ok {
			prefillURL = v
		}
		if v, ok := strings.CutPrefix(a, "--decode="); ok {
			decodeURL = v
		}
	}
	for _, u := range []string{prefillURL, decodeURL} {
		name, _, _ := strings.Cut(strings.TrimPrefix(u, "http://"), ":")
		svc := r.services[name]
		if svc == nil {
			t.Fatalf("proxy URL %q names no rendered Service (%v)", u, keys(r.services))
		}
		if !strings.HasSuffix(u, ":8000") || svc.Spec.Ports[0].Port != 8000 {
			t.Errorf("proxy URL %q, service ports %+v", u, svc.Spec.Ports)
		}
	}
	checkServices(t, r)
}

func TestChartLLMDTopology(t *testing.T) {
	r := mustRender(t, map[string]any{"topology": "llm-d"})
	p, d := r.deployments["demo-kvlease-prefill"], r.deployments["demo-kvlease-decode"]
	if p == nil || d == nil || len(r.deployments) != 2 {
		t.Fatalf("rendered %s", r.kinds())
	}
	checkEngine(t, r, p, "prefill", "prefill", 8000)
	// Decode: the engine on 8200 behind llm-d's routing sidecar on 8000,
	// a native sidecar (an init container that keeps running).
	checkEngine(t, r, d, "decode", "decode", 8200)
	ics := d.Spec.Template.Spec.InitContainers
	if len(ics) != 1 || ics[0].RestartPolicy == nil || *ics[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("decode init containers %+v, want one native sidecar", ics)
	}
	sc := ics[0]
	if !strings.Contains(sc.Image, "llm-d-routing-sidecar") || !slices.Contains(sc.Args, "--port=8000") ||
		!slices.Contains(sc.Args, "--kv-connector=nixlv2") || port(&sc, "sidecar") != 8000 {
		t.Errorf("sidecar %s %v, ports %+v", sc.Image, sc.Args, sc.Ports)
	}
	// The InferencePool selects exactly the engine pods, on the serving
	// port, and names the EPP.
	pool := r.pools["demo-kvlease"]
	if pool == nil {
		t.Fatalf("no InferencePool: %s", r.kinds())
	}
	for _, dep := range []*appsv1.Deployment{p, d} {
		for k, v := range pool.Spec.Selector.MatchLabels {
			if dep.Spec.Template.Labels[k] != v {
				t.Errorf("the pool's selector %s=%s does not select %s", k, v, dep.Name)
			}
		}
	}
	if len(pool.Spec.TargetPorts) != 1 || pool.Spec.TargetPorts[0].Number != 8000 ||
		pool.Spec.EndpointPickerRef.Name == "" || pool.Spec.EndpointPickerRef.PortNumber == nil || *pool.Spec.EndpointPickerRef.PortNumber != 9002 {
		t.Errorf("pool spec %+v", pool.Spec)
	}
	cfg := eppConfig(t, r)
	types := map[string]bool{}
	for _, p := range cfg.Plugins {
		types[p.Type] = true
		if p.Name != "" {
			types[p.Name] = true
		}
	}
	for _, want := range []string{"disagg-profile-handler", "prefill-filter", "decode-filter", "always-disagg-pd-decider", "prefix-cache-scorer"} {
		if !types[want] {
			t.Errorf("EPP config has no %s plugin", want)
		}
	}
	checkServices(t, r)

	// With a threshold, the prefix-based decider.
	r = mustRender(t, map[string]any{"topology": "llm-d", "llmd": map[string]any{"epp": map[string]any{"nonCachedTokens": 256}}})
	cfg = eppConfig(t, r)
	found := false
	for _, p := range cfg.Plugins {
		if p.Type == "prefix-based-pd-decider" && p.Parameters["nonCachedTokens"] == float64(256) {
			found = true
		}
	}
	if !found {
		t.Errorf("no prefix-based-pd-decider with nonCachedTokens 256: %+v", cfg.Plugins)
	}
}

// eppConfig decodes the EPP ConfigMap's configuration strictly and checks
// its references: every pluginRef and decider names a declared plugin.
func eppConfig(t *testing.T, r *rendered) *EndpointPickerConfig {
	t.Helper()
	cm := r.configMaps["demo-kvlease-epp-config"]
	if cm == nil {
		t.Fatalf("no EPP ConfigMap: %s", r.kinds())
	}
	var cfg EndpointPickerConfig
	if err := yaml.UnmarshalStrict([]byte(cm.Data["pd-config.yaml"]), &cfg); err != nil {
		t.Fatalf("EPP config: %v", err)
	}
	if cfg.Kind != "EndpointPickerConfig" || cfg.APIVersion == "" {
		t.Errorf("EPP config %s %s", cfg.APIVersion, cfg.Kind)
	}
	declared := map[string]bool{}
	for _, p := range cfg.Plugins {
		n := p.Name
		if n == "" {
			n = p.Type
		}
		declared[n] = true
	}
	profiles := map[string]bool{}
	for _, sp := range cfg.SchedulingProfiles {
		profiles[sp.Name] = true
		for _, ref := range sp.Plugins {
			if !declared[ref.PluginRef] {
				t.Errorf("profile %s refers to undeclared plugin %s", sp.Name, ref.PluginRef)
			}
		}
	}
	for _, p := range cfg.Plugins {
		if ds, ok := p.Parameters["deciders"].(map[string]any); ok {
			for _, dn := range ds {
				if !declared[dn.(string)] {
					t.Errorf("decider %v not declared", dn)
				}
			}
		}
	}
	if !profiles["decode"] {
		t.Errorf("no decode profile: %v", profiles)
	}
	return &cfg
}

// checkServices: every Service selects pods of a rendered Deployment and
// targets ports those pods have.
func checkServices(t *testing.T, r *rendered) {
	t.Helper()
	for name, svc := range r.services {
		var pods []*corev1.PodTemplateSpec
		for _, d := range r.deployments {
			match := true
			for k, v := range svc.Spec.Selector {
				match = match && d.Spec.Template.Labels[k] == v
			}
			if match {
				pods = append(pods, &d.Spec.Template)
			}
		}
		if len(pods) == 0 {
			t.Errorf("service %s selects no rendered pods", name)
			continue
		}
		for _, sp := range svc.Spec.Ports {
			for _, pod := range pods {
				ok := false
				for _, c := range append(slices.Clone(pod.Spec.Containers), pod.Spec.InitContainers...) {
					for _, cp := range c.Ports {
						ok = ok || (sp.TargetPort.String() == cp.Name || sp.TargetPort.IntValue() == int(cp.ContainerPort))
					}
				}
				if !ok {
					t.Errorf("service %s port %s targets %s, which its pods do not have", name, sp.Name, sp.TargetPort.String())
				}
			}
		}
	}
}

func TestChartAggregatedAndOptions(t *testing.T) {
	r := mustRender(t, map[string]any{"mode": "aggregated", "serviceMonitor": map[string]any{"enabled": true},
		"clusterSecret": map[string]any{"existingSecret": "ours", "existingSecretKey": "k"}})
	e := r.deployments["demo-kvlease-engine"]
	if e == nil || r.deployments["demo-kvlease-proxy"] == nil || len(r.deployments) != 2 {
		t.Fatalf("rendered %s", r.kinds())
	}
	if len(r.secrets) != 0 {
		t.Errorf("a Secret rendered beside an existing one: %v", keys(r.secrets))
	}
	c := container(e, "kvlease")
	if ref := env(c, "KVLEASE_CLUSTER_SECRET").ValueFrom.SecretKeyRef; ref.Name != "ours" || ref.Key != "k" {
		t.Errorf("secret ref %+v, want ours/k", ref)
	}
	if e.Spec.Template.Labels["llm-d.ai/role"] != "prefill-decode" || env(c, "KVLEASE_ROLE").Value != "both" {
		t.Errorf("aggregated engines: role label %q, KVLEASE_ROLE %q", e.Spec.Template.Labels["llm-d.ai/role"], env(c, "KVLEASE_ROLE").Value)
	}
	sm := r.serviceMonitors["demo-kvlease"]
	if sm == nil || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Fatalf("ServiceMonitor %+v", sm)
	}
	ms := r.services["demo-kvlease-metrics"]
	for k, v := range sm.Spec.Selector.MatchLabels {
		if ms == nil || ms.Labels[k] != v {
			t.Fatalf("the ServiceMonitor does not select the metrics Service")
		}
	}
	checkServices(t, r)

	// llm-d with aggregated engines: the pool, and a decode-only profile.
	r = mustRender(t, map[string]any{"topology": "llm-d", "mode": "aggregated"})
	if len(r.pools) != 1 || len(r.deployments) != 1 {
		t.Fatalf("rendered %s", r.kinds())
	}
	eppConfig(t, r)
}

// TestChartLeaseTopic: the lease events topic goes to the engines that
// hold leases (prefill, and aggregated), not to decode engines, which have
// none and would refuse it.
func TestChartLeaseTopic(t *testing.T) {
	const topic = "kvlease-leases@$(POD_IP):8000"
	for _, mode := range []string{"disaggregated", "aggregated"} {
		r := mustRender(t, map[string]any{"mode": mode, "kvEvents": map[string]any{"leaseTopic": topic}})
		for name, d := range r.deployments {
			c := container(d, "kvlease")
			if c == nil {
				continue // the proxy
			}
			e, role := env(c, "KVLEASE_KV_EVENTS_LEASE_TOPIC"), env(c, "KVLEASE_ROLE").Value
			if role == "decode" && e != nil || role != "decode" && (e == nil || e.Value != topic) {
				t.Errorf("%s (%s): KVLEASE_KV_EVENTS_LEASE_TOPIC %+v", name, role, e)
			}
		}
	}
	if e := env(container(mustRender(t, nil).deployments["demo-kvlease-prefill"], "kvlease"), "KVLEASE_KV_EVENTS_LEASE_TOPIC"); e != nil {
		t.Errorf("lease events on by default: %+v", e)
	}
}

// TestChartRefuses: values that would deploy something broken fail the
// render with a message naming the value.
func TestChartRefuses(t *testing.T) {
	for _, c := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"terminationGracePeriodSeconds": 30, "drainTimeoutSeconds": 30}, "terminationGracePeriodSeconds (30) must exceed drainTimeoutSeconds (30)"},
		{map[string]any{"topology": "dynamo"}, `topology "dynamo"`},
		{map[string]any{"mode": "both"}, `mode "both"`},
		{map[string]any{"clusterSecret": map[string]any{"value": "short"}}, "clusterSecret.value"},
		{map[string]any{"kvEvents": map[string]any{"encoding": "json"}}, "kvEvents.encoding"},
		{map[string]any{"topology": "llm-d", "llmd": map[string]any{"enginePort": 8000}}, "llmd.enginePort"},
	} {
		_, err := render(c.values)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %v: err %v, want %q", c.values, err, c.want)
		}
	}
}

// TestStrictDecoding: an object with a field its Kubernetes type does not
// have (here through extraEnv) fails the decoding, so the checks above
// cannot pass over a misspelt field.
func TestStrictDecoding(t *testing.T) {
	files, err := render(map[string]any{"prefill": map[string]any{"extraEnv": []any{map[string]any{"name": "X", "vaule": "typo"}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := &rendered{deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{}, pools: map[string]*InferencePool{}}
	failed := false
	for _, doc := range releaseutil.SplitManifests(files["kvlease/templates/engines.yaml"]) {
		if err := r.add([]byte(doc)); err != nil {
			if !strings.Contains(err.Error(), "vaule") {
				t.Errorf("error %v does not name the field", err)
			}
			failed = true
		}
	}
	if !failed {
		t.Fatal("a Deployment with an unknown field decoded")
	}
}

// TestChartLeaseSpill: prefill.leaseSpill becomes the prefill engines'
// KVLEASE_LEASE_SPILL beside their offload tiers; unset, no variable.
func TestChartLeaseSpill(t *testing.T) {
	r := mustRender(t, map[string]any{"prefill": map[string]any{"offload": "cpu:8GiB", "leaseSpill": "pressure"}})
	c := container(r.deployments["demo-kvlease-prefill"], "kvlease")
	if e := env(c, "KVLEASE_LEASE_SPILL"); e == nil || e.Value != "pressure" {
		t.Fatalf("KVLEASE_LEASE_SPILL %+v, want pressure", e)
	}
	if e := env(container(r.deployments["demo-kvlease-decode"], "kvlease"), "KVLEASE_LEASE_SPILL"); e != nil {
		t.Errorf("decode engines got KVLEASE_LEASE_SPILL %q", e.Value)
	}
	if e := env(container(mustRender(t, nil).deployments["demo-kvlease-prefill"], "kvlease"), "KVLEASE_LEASE_SPILL"); e != nil {
		t.Errorf("KVLEASE_LEASE_SPILL %q set by default", e.Value)
	}
}

// TestChartTLS: with tls.secretName the engines get the Secret's files as
// --ssl-* (their environment), mounted read only, and HTTPS probes; the
// proxy serves HTTPS, dials https engine URLs and verifies them against
// ca.crt, presenting the certificate. llm-d's topology and
// clientCertReqs 2 are refused.
func TestChartTLS(t *testing.T) {
	r := mustRender(t, map[string]any{"tls": map[string]any{"secretName": "kv-tls", "clientCertReqs": 1}})
	for _, name := range []string{"demo-kvlease-prefill", "demo-kvlease-decode", "demo-kvlease-proxy"} {
		d := r.deployments[name]
		if d == nil {
			t.Fatalf("no %s: %s", name, r.kinds())
		}
		c := &d.Spec.Template.Spec.Containers[0]
		mounted := false
		for _, m := range c.VolumeMounts {
			mounted = mounted || m.Name == "tls" && m.MountPath == "/etc/kvlease/tls" && m.ReadOnly
		}
		secret := false
		for _, v := range d.Spec.Template.Spec.Volumes {
			secret = secret || v.Name == "tls" && v.Secret != nil && v.Secret.SecretName == "kv-tls"
		}
		if !mounted || !secret {
			t.Errorf("%s: the Secret is not mounted read only at /etc/kvlease/tls", name)
		}
		for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
			if p != nil && p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
				t.Errorf("%s: probe %s over %s", name, p.HTTPGet.Path, p.HTTPGet.Scheme)
			}
		}
		if name == "demo-kvlease-proxy" {
			args := strings.Join(c.Args, " ")
			for _, want := range []string{"--prefill=https://demo-kvlease-prefill:8000", "--decode=https://demo-kvlease-decode:8000",
				"--ssl-certfile=/etc/kvlease/tls/tls.crt", "--ssl-keyfile=/etc/kvlease/tls/tls.key",
				"--engine-ssl-ca-certs=/etc/kvlease/tls/ca.crt", "--engine-ssl-certfile=/etc/kvlease/tls/tls.crt"} {
				if !strings.Contains(args, want) {
					t.Errorf("proxy args %q lack %s", args, want)
				}
			}
			continue
		}
		for k, want := range map[string]string{"KVLEASE_SSL_CERTFILE": "/etc/kvlease/tls/tls.crt", "KVLEASE_SSL_KEYFILE": "/etc/kvlease/tls/tls.key",
			"KVLEASE_SSL_CA_CERTS": "/etc/kvlease/tls/ca.crt", "KVLEASE_SSL_CERT_REQS": "1"} {
			if e := env(c, k); e == nil || e.Value != want {
				t.Errorf("%s: %s = %v, want %s", name, k, e, want)
			}
		}
	}
	if c := container(mustRender(t, nil).deployments["demo-kvlease-decode"], "kvlease"); env(c, "KVLEASE_SSL_CERTFILE") != nil ||
		c.LivenessProbe.HTTPGet.Scheme != corev1.URISchemeHTTP {
		t.Error("TLS without tls.secretName")
	}
	for values, want := range map[string]map[string]any{
		"topology llm-d": {"topology": "llm-d", "tls": map[string]any{"secretName": "kv-tls"}},
		"clientCertReqs": {"tls": map[string]any{"secretName": "kv-tls", "clientCertReqs": 2}},
	} {
		if _, err := render(want); err == nil || !strings.Contains(err.Error(), values) {
			t.Errorf("values %v: err %v, want it to name %s", want, err, values)
		}
	}
}
