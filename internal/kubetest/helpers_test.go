package kubetest_test

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var metav1CreateOptions = metav1.CreateOptions{}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
