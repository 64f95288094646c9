package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/arbiterhq/arbiter/config"
)

// chart is the chart's directory.
const chart = "helm/arbiter"

// helmSecrets are the three secrets given as values.
var helmSecrets = []string{
	"secrets.databaseURL=postgres://arbiter:pw@postgres.db:5432/arbiter?sslmode=require",
	"secrets.secretKey=" + composeSecrets["ARBITER_SECRET_KEY"],
	"secrets.sessionSecret=" + composeSecrets["ARBITER_SESSION_SECRET"],
}

// helmBin returns the pinned helm make installs (HELM), skipping the test
// when it is missing and ARBITER_REQUIRE_DEPLOY_TOOLS is not 1.
func helmBin(t *testing.T) string {
	t.Helper()
	helm := os.Getenv("HELM")
	if helm == "" {
		helm, _ = exec.LookPath("helm")
	}
	if helm == "" {
		if os.Getenv("ARBITER_REQUIRE_DEPLOY_TOOLS") == "1" {
			t.Fatal("helm is missing: make deploy-check installs the pinned one")
		}
		t.Skip("helm is missing: make deploy-check installs the pinned one")
	}
	return helm
}

// helm runs helm with args and returns its stdout.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := exec.Command(helmBin(t), args...)
	c.Stdout, c.Stderr = &stdout, &stderr
	c.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if err := c.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// setArgs turns key=value pairs into helm's --set flags.
func setArgs(values ...string) []string {
	var args []string
	for _, v := range values {
		args = append(args, "--set", v)
	}
	return args
}

// rendered is one manifest of `helm template`, decoded into its API type.
type rendered struct {
	kind, name string
	object     any
}

// render runs `helm template` with values and decodes every manifest
// strictly into its k8s.io/api type: a field the type does not have fails
// the test, as the API server would refuse it.
func render(t *testing.T, values ...string) []rendered {
	t.Helper()
	out, err := helm(t, append([]string{"template", "arb", chart, "--namespace", "ops"}, setArgs(values...)...)...)
	if err != nil {
		t.Fatal(err)
	}
	var objects []rendered
	for _, doc := range strings.Split(out, "\n---") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("a rendered manifest is not YAML: %v\n%s", err, doc)
		}
		var object any
		switch head.APIVersion + "/" + head.Kind {
		case "apps/v1/Deployment":
			object = &appsv1.Deployment{}
		case "batch/v1/Job":
			object = &batchv1.Job{}
		case "v1/Service":
			object = &corev1.Service{}
		case "v1/Secret":
			object = &corev1.Secret{}
		case "policy/v1/PodDisruptionBudget":
			object = &policyv1.PodDisruptionBudget{}
		case "autoscaling/v2/HorizontalPodAutoscaler":
			object = &autoscalingv2.HorizontalPodAutoscaler{}
		case "networking.k8s.io/v1/Ingress":
			object = &networkingv1.Ingress{}
		default:
			t.Fatalf("the chart renders %s %s, which this test does not know", head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), object); err != nil {
			t.Errorf("%s %s does not decode strictly into its API type: %v", head.Kind, head.Metadata.Name, err)
			continue
		}
		objects = append(objects, rendered{head.Kind, head.Metadata.Name, object})
	}
	return objects
}

// find returns the rendered object of that kind and name, or nil.
func find[T any](objects []rendered, kind, name string) *T {
	for _, o := range objects {
		if o.kind == kind && o.name == name {
			if v, ok := o.object.(*T); ok {
				return v
			}
		}
	}
	return nil
}

// TestHelm_Lint runs `helm lint --strict` on the chart with its secrets.
func TestHelm_Lint(t *testing.T) {
	t.Parallel()
	if out, err := helm(t, append([]string{"lint", "--strict", chart}, setArgs(helmSecrets...)...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestHelm_RequiresTheSecrets: without the three secrets or an existing
// Secret, the chart does not render, and says which value is missing.
func TestHelm_RequiresTheSecrets(t *testing.T) {
	t.Parallel()
	_, err := helm(t, append([]string{"template", "arb", chart}, setArgs(helmSecrets[1:]...)...)...)
	if err == nil || !strings.Contains(err.Error(), "secrets.databaseURL (or secrets.existingSecret) is required") {
		t.Fatalf("template without the database URL = %v, want it named", err)
	}
}

// TestHelm_Defaults renders the chart with its defaults and the secrets:
// serve and worker Deployments with probes on /livez and /readyz, a
// non-root read-only security context and resources; the migrate Job as a
// pre-install/pre-upgrade hook after the Secret's; a Service on serve's
// pods; PodDisruptionBudgets matching them; no HPA nor Ingress; and every
// container's environment, its secrets read from the rendered Secret, one
// Arbiter's configuration accepts, with ARBITER_MIGRATE=off.
func TestHelm_Defaults(t *testing.T) {
	t.Parallel()
	objects := render(t, helmSecrets...)
	secret := find[corev1.Secret](objects, "Secret", "arb-arbiter")
	if secret == nil {
		t.Fatal("no Secret rendered")
	}
	if secret.Annotations["helm.sh/hook"] != "pre-install,pre-upgrade" || secret.Annotations["helm.sh/hook-weight"] != "-10" {
		t.Errorf("the Secret's hook annotations %v: the migrate Job, a hook, needs it first", secret.Annotations)
	}
	job := find[batchv1.Job](objects, "Job", "arb-arbiter-migrate")
	if job == nil {
		t.Fatal("no migrate Job rendered")
	}
	if job.Annotations["helm.sh/hook"] != "pre-install,pre-upgrade" || job.Annotations["helm.sh/hook-weight"] != "0" {
		t.Errorf("the migrate Job's hook annotations %v", job.Annotations)
	}
	if got := job.Spec.Template.Spec.Containers[0].Args; !slices.Equal(got, []string{"migrate"}) || job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("migrate Job args %q restart %q", got, job.Spec.Template.Spec.RestartPolicy)
	}
	checkPod(t, "migrate", job.Spec.Template.Spec, secret, nil)

	service := find[corev1.Service](objects, "Service", "arb-arbiter")
	for _, c := range []struct {
		component string
		args      []string
		port      string
	}{{"serve", []string{"serve", "--worker=false"}, "http"}, {"worker", []string{"worker"}, "metrics"}} {
		d := find[appsv1.Deployment](objects, "Deployment", "arb-arbiter-"+c.component)
		if d == nil {
			t.Fatalf("no %s Deployment rendered", c.component)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("%s replicas %v, want 2", c.component, d.Spec.Replicas)
		}
		pod := d.Spec.Template.Spec
		if got := pod.Containers[0].Args; !slices.Equal(got, c.args) {
			t.Errorf("%s args %q, want %q", c.component, got, c.args)
		}
		checkPod(t, c.component, pod, secret, map[string]string{"startup": "/livez", "liveness": "/livez", "readiness": "/readyz"})
		for _, probe := range []*corev1.Probe{pod.Containers[0].StartupProbe, pod.Containers[0].LivenessProbe, pod.Containers[0].ReadinessProbe} {
			if probe != nil && probe.HTTPGet.Port.StrVal != c.port {
				t.Errorf("%s probes port %q, want %q", c.component, probe.HTTPGet.Port.StrVal, c.port)
			}
		}
		if !matches(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("%s selector %v does not select its pods %v", c.component, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		}
		pdb := find[policyv1.PodDisruptionBudget](objects, "PodDisruptionBudget", "arb-arbiter-"+c.component)
		if pdb == nil || !matches(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) || pdb.Spec.MinAvailable.IntValue() != 1 {
			t.Errorf("%s PodDisruptionBudget %+v, want one of minAvailable 1 over its pods", c.component, pdb)
		}
		if c.component == "serve" && (service == nil || !matches(service.Spec.Selector, d.Spec.Template.Labels) || service.Spec.Ports[0].TargetPort.StrVal != "http") {
			t.Errorf("the Service %+v does not reach serve's pods", service)
		}
		if c.component == "worker" && matches(service.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("the Service selects the worker's pods too")
		}
	}
	for _, o := range objects {
		if o.kind == "HorizontalPodAutoscaler" || o.kind == "Ingress" {
			t.Errorf("%s %s rendered by default, want it off", o.kind, o.name)
		}
	}
}

// TestHelm_EverythingOn renders the chart with an existing Secret, the
// Ingress and the HPA on: the HPA scales serve's Deployment, which then
// names no replica count of its own; the Ingress reaches the Service; no
// Secret is made and every secret reference names the existing one.
func TestHelm_EverythingOn(t *testing.T) {
	t.Parallel()
	objects := render(t, "secrets.existingSecret=arbiter-prod", "serve.autoscaling.enabled=true", "ingress.enabled=true",
		"ingress.className=nginx", "ingress.tls[0].secretName=arbiter-tls", "ingress.tls[0].hosts[0]=arbiter.example.com",
		"env.ARBITER_BASE_URL=https://arbiter.example.com", "env.ARBITER_AGENT=rules")
	if find[corev1.Secret](objects, "Secret", "arb-arbiter") != nil {
		t.Error("a Secret was made beside the existing one")
	}
	hpa := find[autoscalingv2.HorizontalPodAutoscaler](objects, "HorizontalPodAutoscaler", "arb-arbiter-serve")
	if hpa == nil || hpa.Spec.ScaleTargetRef.Name != "arb-arbiter-serve" || hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.MaxReplicas != 10 {
		t.Errorf("HPA %+v, want one scaling arb-arbiter-serve", hpa)
	}
	serve := find[appsv1.Deployment](objects, "Deployment", "arb-arbiter-serve")
	if serve == nil || serve.Spec.Replicas != nil {
		t.Errorf("serve under the HPA names replicas %v, want none", serve.Spec.Replicas)
	}
	ingress := find[networkingv1.Ingress](objects, "Ingress", "arb-arbiter")
	if ingress == nil || *ingress.Spec.IngressClassName != "nginx" || ingress.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name != "arb-arbiter" ||
		ingress.Spec.TLS[0].SecretName != "arbiter-tls" {
		t.Errorf("Ingress %+v", ingress)
	}
	env := map[string]string{}
	for _, e := range serve.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef.Name != "arbiter-prod" {
			t.Errorf("%s reads Secret %q, want arbiter-prod", e.Name, e.ValueFrom.SecretKeyRef.Name)
		}
		env[e.Name] = e.Value
	}
	if env["ARBITER_BASE_URL"] != "https://arbiter.example.com" || env["ARBITER_AGENT"] != "rules" {
		t.Errorf("the env values did not reach serve: %v", env)
	}
}

// checkPod checks one pod of the chart: non-root, read-only, no
// privilege escalation, capabilities dropped, resources, the probes'
// paths, and its environment as Arbiter reads it.
func checkPod(t *testing.T, component string, pod corev1.PodSpec, secret *corev1.Secret, probes map[string]string) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("%s pod security context %+v, want non-root uid 65532", component, psc)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s mounts a service account token it does not need", component)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%s has %d containers, want 1", component, len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("%s container security context %+v, want a read-only root, no escalation, every capability dropped", component, sc)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s resources %+v, want CPU requested and memory limited", component, c.Resources)
	}
	for kind, path := range probes {
		probe := map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe}[kind]
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path {
			t.Errorf("%s %s probe %+v, want GET %s", component, kind, probe, path)
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil && secret != nil && e.ValueFrom.SecretKeyRef.Name == secret.Name:
			v, ok := secret.StringData[e.ValueFrom.SecretKeyRef.Key]
			if !ok {
				t.Errorf("%s: %s reads the Secret's %q, which it has not", component, e.Name, e.ValueFrom.SecretKeyRef.Key)
			}
			env[e.Name] = v
		default:
			t.Errorf("%s: %s comes from %+v", component, e.Name, e.ValueFrom)
		}
	}
	for _, name := range []string{"ARBITER_DATABASE_URL", "ARBITER_SECRET_KEY", "ARBITER_SESSION_SECRET"} {
		if env[name] == "" {
			t.Errorf("%s: %s is not set from the Secret", component, name)
		}
	}
	if env["ARBITER_MIGRATE"] != "off" {
		t.Errorf("%s: ARBITER_MIGRATE = %q, want off (the Job migrates)", component, env["ARBITER_MIGRATE"])
	}
	if _, err := config.FromEnv(func(k string) string { return env[k] }, config.ScopeStore, config.ScopeWorker, config.ScopeHTTP); err != nil {
		t.Errorf("%s: Arbiter refuses the environment: %v", component, err)
	}
}

// matches reports whether labels has every key and value of selector.
func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
