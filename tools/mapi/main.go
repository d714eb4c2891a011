// Command mapi-fake runs OpenShift's generic Machine API machine controller
// (github.com/openshift/machine-api-operator/pkg/controller/machine: the
// machine and machine-drain controllers every OpenShift provider embeds), its
// nodelink controller and its MachineSet controller
// (pkg/controller/machineset: replicas, delete policies and the
// machine.openshift.io/delete-machine annotation), outside a cluster, with a
// fake actuator instead of a cloud provider.
//
// The fake actuator keeps one ConfigMap per Machine as its "instance"
// (<machine>-fake-instance in the Machine's namespace), so that what the
// controller asks of the provider can be seen in the API: Create creates it
// and gives the Machine a providerID, Exists looks it up (uncached), Update
// fills a missing providerID, Delete deletes it. The Node is whatever Node
// carries the same spec.providerID (nodelink sets status.nodeRef from it).
//
// Used by hack/controllers.py; built by hack/build-controllers.sh.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"

	openshiftfeatures "github.com/openshift/api/features"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	"github.com/openshift/machine-api-operator/pkg/controller/machine"
	"github.com/openshift/machine-api-operator/pkg/controller/machineset"
	"github.com/openshift/machine-api-operator/pkg/controller/nodelink"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// version is set at build time (-X main.version=...): the machine-api-operator module version.
var version = "unknown"

const instanceSuffix = "-fake-instance"

// fakeActuator is the provider side of the machine controller: an "instance"
// is a ConfigMap, so creating and deleting one is an API call anyone can watch.
type fakeActuator struct {
	client client.Client // writes
	reader client.Reader // uncached reads: Exists must see a Delete at once
}

func instanceKey(m *machinev1.Machine) client.ObjectKey {
	return client.ObjectKey{Namespace: m.Namespace, Name: m.Name + instanceSuffix}
}

// providerID is spec.providerSpec.value.providerID when given, else fake://<namespace>/<name>.
func providerID(m *machinev1.Machine) string {
	if m.Spec.ProviderSpec.Value != nil && len(m.Spec.ProviderSpec.Value.Raw) > 0 {
		var value struct {
			ProviderID string `json:"providerID"`
		}
		if err := json.Unmarshal(m.Spec.ProviderSpec.Value.Raw, &value); err == nil && value.ProviderID != "" {
			return value.ProviderID
		}
	}
	return fmt.Sprintf("fake://%s/%s", m.Namespace, m.Name)
}

// setProviderID writes spec.providerID as a real provider does once its instance exists.
func (a *fakeActuator) setProviderID(ctx context.Context, m *machinev1.Machine) error {
	if m.Spec.ProviderID != nil && *m.Spec.ProviderID != "" {
		return nil
	}
	before := m.DeepCopy()
	id := providerID(m)
	m.Spec.ProviderID = &id
	return a.client.Patch(ctx, m, client.MergeFrom(before))
}

func (a *fakeActuator) Create(ctx context.Context, m *machinev1.Machine) error {
	key := instanceKey(m)
	instance := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      key.Name,
			Namespace: key.Namespace,
			Labels:    map[string]string{"lifecycle.machine.dev/fake-instance-of": m.Name},
		},
		Data: map[string]string{"providerID": providerID(m), "machineUID": string(m.UID)},
	}
	if err := a.client.Create(ctx, instance); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating fake instance %s: %w", key, err)
	}
	klog.Infof("%s: fake instance %s created", m.Name, key)
	return a.setProviderID(ctx, m)
}

func (a *fakeActuator) Update(ctx context.Context, m *machinev1.Machine) error {
	return a.setProviderID(ctx, m)
}

func (a *fakeActuator) Exists(ctx context.Context, m *machinev1.Machine) (bool, error) {
	err := a.reader.Get(ctx, instanceKey(m), &corev1.ConfigMap{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func (a *fakeActuator) Delete(ctx context.Context, m *machinev1.Machine) error {
	key := instanceKey(m)
	err := a.client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting fake instance %s: %w", key, err)
	}
	klog.Infof("%s: fake instance %s deleted", m.Name, key)
	return nil
}

func main() {
	klog.InitFlags(nil)
	namespace := flag.String("namespace", "", "reconcile the Machines of this namespace only (default: every namespace)")
	healthAddr := flag.String("health-addr", "127.0.0.1:9440", "address of /healthz and /readyz")
	metricsAddr := flag.String("metrics-bind-address", "0", "address of the metrics endpoint (0: off)")
	withNodelink := flag.Bool("nodelink", true, "also run the nodelink controller (sets status.nodeRef from the Node of the same providerID)")
	withMachineSets := flag.Bool("machinesets", true, "also run the MachineSet controller (creates and deletes a MachineSet's Machines to match its replicas)")
	printVersion := flag.Bool("version", false, "print the machine-api-operator version and exit")
	flag.Parse()
	if *printVersion {
		fmt.Println(version)
		return
	}
	ctrl.SetLogger(klog.NewKlogr())

	// The machine controller asks for MachineAPIMigration; an unknown gate panics.
	gate := featuregate.NewFeatureGate()
	if err := gate.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		featuregate.Feature(openshiftfeatures.FeatureGateMachineAPIMigration): {Default: false, PreRelease: featuregate.Alpha},
	}); err != nil {
		klog.Fatalf("feature gates: %v", err)
	}

	opts := manager.Options{
		Metrics:                server.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: *healthAddr,
		LeaderElection:         false,
	}
	if *namespace != "" {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{*namespace: {}}
		// Nodes are cluster-scoped: nodelink and the drain still see all of them.
	}
	mgr, err := manager.New(config.GetConfigOrDie(), opts)
	if err != nil {
		klog.Fatalf("manager: %v", err)
	}
	if err := machinev1.Install(mgr.GetScheme()); err != nil {
		klog.Fatalf("scheme: %v", err)
	}
	actuator := &fakeActuator{client: mgr.GetClient(), reader: mgr.GetAPIReader()}
	if err := machine.AddWithActuator(mgr, actuator, gate); err != nil {
		klog.Fatalf("machine controller: %v", err)
	}
	if *withNodelink {
		if err := nodelink.Add(mgr, opts); err != nil {
			klog.Fatalf("nodelink controller: %v", err)
		}
	}
	if *withMachineSets {
		// The same feature gate as the machine controller: MachineAPIMigration off, so every MachineSet is reconciled.
		if err := machineset.Add(mgr, opts, gate); err != nil {
			klog.Fatalf("machineset controller: %v", err)
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		klog.Fatal(err)
	}
	// Ready once the informers the controllers started have synced, not merely once the probe listens.
	var synced atomic.Bool
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			synced.Store(true)
		}
		<-ctx.Done()
		return nil
	})); err != nil {
		klog.Fatal(err)
	}
	if err := mgr.AddReadyzCheck("informers-synced", func(_ *http.Request) error {
		if !synced.Load() {
			return fmt.Errorf("informers not synced yet")
		}
		return nil
	}); err != nil {
		klog.Fatal(err)
	}
	klog.Infof("machine-api-operator %s generic machine controller with a fake actuator (MachineSet controller: %v); namespace %q", version, *withMachineSets, *namespace)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		klog.Errorf("manager: %v", err)
		os.Exit(1)
	}
}
