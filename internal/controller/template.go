package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/jobspec"
)

// Template is what an administrator installs for the agent-sandbox
// backend to serve image: a SandboxTemplate of the pod jobspec builds
// (with the credentials creds, which claims cannot add, and the
// resources res) that lets claims set plain variables, and a
// SandboxWarmPool of replicas ready pods of it, both named name.
func Template(pod jobspec.Config, namespace, name, image string, creds []v1alpha1.Credential, res v1alpha1.Resources, replicas int32) (*extv1beta1.SandboxTemplate, *extv1beta1.SandboxWarmPool) {
	spec := pod.PodTemplate(jobspec.Sandbox{
		Name: name, Namespace: namespace, ID: name, TaskID: name, Image: image,
		Credentials: creds, Resources: res,
	})
	// restartPolicy stays Never: an agent that exited must not start
	// again on the same workspace.
	tpl := &extv1beta1.SandboxTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: extv1beta1.GroupVersion.String(), Kind: extv1beta1.SandboxTemplateKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: extv1beta1.SandboxTemplateSpec{
			SandboxBlueprint: agentsv1beta1.SandboxBlueprint{PodTemplate: agentsv1beta1.PodTemplate{
				ObjectMeta: agentsv1beta1.PodMetadata{Labels: spec.Labels, Annotations: spec.Annotations},
				Spec:       spec.Spec,
			}},
			EnvVarsInjectionPolicy: extv1beta1.EnvVarsInjectionPolicyAllowed,
		},
	}
	wp := &extv1beta1.SandboxWarmPool{
		TypeMeta:   metav1.TypeMeta{APIVersion: extv1beta1.GroupVersion.String(), Kind: extv1beta1.SandboxWarmPoolKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: extv1beta1.SandboxWarmPoolSpec{
			Replicas:    &replicas,
			TemplateRef: extv1beta1.SandboxTemplateRef{Name: name},
		},
	}
	return tpl, wp
}
