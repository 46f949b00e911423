// Package deploy holds the tests of kvlease's Kubernetes deployment: the
// Helm chart in helm/kvlease is rendered with the Helm Go SDK, as `helm
// template` renders it, and every object is decoded strictly into its
// Kubernetes API type. It is its own Go module so that the Helm and
// Kubernetes libraries stay out of kvlease's. Its Helm release is the one
// built on the Kubernetes version interop/'s llm-d components use, and every
// module both require is at interop/'s version, so the two modules compile
// one set of Kubernetes packages between them.
package deploy

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// InferencePool mirrors inference.networking.k8s.io/v1 InferencePool
// (gateway-api-inference-extension, api/v1/inferencepool_types.go), whose
// Go module the module proxy does not serve: the fields the chart may set,
// so that strict decoding refuses any other.
type InferencePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		TargetPorts []struct {
			Number int32 `json:"number"`
		} `json:"targetPorts"`
		EndpointPickerRef struct {
			Group       *string `json:"group,omitempty"`
			Kind        string  `json:"kind,omitempty"`
			Name        string  `json:"name"`
			PortNumber  *int32  `json:"portNumber,omitempty"`
			FailureMode string  `json:"failureMode,omitempty"`
		} `json:"endpointPickerRef"`
	} `json:"spec"`
}

// EndpointPickerConfig mirrors the EPP configuration file of llm-d's
// inference scheduler (apiVersion inference.networking.x-k8s.io/v1alpha1):
// plugins by type (with an optional name and parameters) and scheduling
// profiles referring to them.
type EndpointPickerConfig struct {
	APIVersion   string   `json:"apiVersion"`
	Kind         string   `json:"kind"`
	FeatureGates []string `json:"featureGates,omitempty"`
	Plugins      []struct {
		Type       string         `json:"type"`
		Name       string         `json:"name,omitempty"`
		Parameters map[string]any `json:"parameters,omitempty"`
	} `json:"plugins"`
	SchedulingProfiles []struct {
		Name    string `json:"name"`
		Plugins []struct {
			PluginRef string   `json:"pluginRef"`
			Weight    *float64 `json:"weight,omitempty"`
		} `json:"plugins"`
	} `json:"schedulingProfiles"`
}

// rendered is a chart's objects, decoded.
type rendered struct {
	deployments     map[string]*appsv1.Deployment
	services        map[string]*corev1.Service
	secrets         map[string]*corev1.Secret
	configMaps      map[string]*corev1.ConfigMap
	pools           map[string]*InferencePool
	serviceMonitors map[string]*monitoringv1.ServiceMonitor
}

const (
	releaseName = "demo"
	namespace   = "serving"
)

// render renders the chart with values as `helm template demo helm/kvlease
// --namespace serving` does (no cluster: lookup finds nothing).
func render(values map[string]any) (map[string]string, error) {
	ch, err := loader.Load(filepath.Join("helm", "kvlease"))
	if err != nil {
		return nil, err
	}
	if err := ch.Validate(); err != nil {
		return nil, err
	}
	vals, err := chartutil.ToRenderValues(ch, values,
		chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true},
		chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, vals)
}

// mustRender renders and decodes strictly: an unknown field, a wrong type,
// an unknown kind or an object rendered twice fails the test.
func mustRender(t *testing.T, values map[string]any) *rendered {
	t.Helper()
	files, err := render(values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	r := &rendered{deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{},
		pools: map[string]*InferencePool{}, serviceMonitors: map[string]*monitoringv1.ServiceMonitor{}}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(files[name]) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			if err := r.add([]byte(doc)); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
		}
	}
	return r
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func decodeInto[T any](m map[string]*T, doc []byte, name func(*T) string) error {
	obj := new(T)
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return err
	}
	n := name(obj)
	if n == "" {
		return fmt.Errorf("an object without a name")
	}
	if _, dup := m[n]; dup {
		return fmt.Errorf("%s rendered twice", n)
	}
	m[n] = obj
	return nil
}

func (r *rendered) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		return decodeInto(r.deployments, doc, func(o *appsv1.Deployment) string { return o.Name })
	case "v1 Service":
		return decodeInto(r.services, doc, func(o *corev1.Service) string { return o.Name })
	case "v1 Secret":
		return decodeInto(r.secrets, doc, func(o *corev1.Secret) string { return o.Name })
	case "v1 ConfigMap":
		return decodeInto(r.configMaps, doc, func(o *corev1.ConfigMap) string { return o.Name })
	case "inference.networking.k8s.io/v1 InferencePool":
		return decodeInto(r.pools, doc, func(o *InferencePool) string { return o.Name })
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return decodeInto(r.serviceMonitors, doc, func(o *monitoringv1.ServiceMonitor) string { return o.Name })
	}
	return fmt.Errorf("unexpected object %s %s", tm.APIVersion, tm.Kind)
}

func (r *rendered) kinds() string {
	return fmt.Sprintf("%d deployments %v, %d services, %d secrets, %d config maps, %d pools, %d service monitors",
		len(r.deployments), keys(r.deployments), len(r.services), len(r.secrets), len(r.configMaps), len(r.pools), len(r.serviceMonitors))
}

func keys[T any](m map[string]T) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func env(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func container(d *appsv1.Deployment, name string) *corev1.Container {
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == name {
			return &d.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}

func port(c *corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}
