// Package v1alpha1 is the narad.dev/v1alpha1 API of the Narad operator: NaradCluster (a broker
// cluster run as a StatefulSet), Topic (a broker topic) and FanoutLink (a parent → child fan-out
// link). The operator reconciles these objects through the brokers' HTTP admin API; the types here
// are the user contract and hold no behaviour beyond generated deepcopy.
//
// +kubebuilder:object:generate=true
// +groupName=narad.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of every kind in this package.
var GroupVersion = schema.GroupVersion{Group: "narad.dev", Version: "v1alpha1"}

var (
	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&NaradCluster{}, &NaradClusterList{},
		&Topic{}, &TopicList{},
		&FanoutLink{}, &FanoutLinkList{},
		&NaradUser{}, &NaradUserList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
