// resolver-driver runs upstream OLM's resolver (pkg/controller/registry/resolver) on
// Subscription sets read from a JSON file, against one catalog served over the
// operator-registry gRPC API, and prints timings and the chosen bundles as JSON.
//
// The catalog reaches the resolver exactly as it does in the catalog-operator: through
// RegistrySourceProvider (ListBundles + GetPackage over gRPC), with a CatalogSource lister
// holding one CatalogSource. The first resolution of each set pays for that snapshot;
// the later ones reuse the resolver cache, as a running catalog-operator does.
//
// Usage: resolver-driver -address 127.0.0.1:50051 -input sets.json [-min-time 2s]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	v1alpha1listers "github.com/operator-framework/operator-lifecycle-manager/pkg/api/client/listers/operators/v1alpha1"
	"github.com/operator-framework/operator-lifecycle-manager/pkg/controller/registry"
	"github.com/operator-framework/operator-lifecycle-manager/pkg/controller/registry/resolver"
	resolvercache "github.com/operator-framework/operator-lifecycle-manager/pkg/controller/registry/resolver/cache"
	"github.com/operator-framework/operator-registry/pkg/client"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8scache "k8s.io/client-go/tools/cache"
)

type subscriptionIn struct {
	Name        string `json:"name"`
	Package     string `json:"package"`
	Channel     string `json:"channel,omitempty"`
	StartingCSV string `json:"startingCSV,omitempty"`
}

type setIn struct {
	Label         string           `json:"label"`
	Subscriptions []subscriptionIn `json:"subscriptions"`
}

type input struct {
	Namespace        string  `json:"namespace"`
	CatalogName      string  `json:"catalogName"`
	CatalogNamespace string  `json:"catalogNamespace"`
	Sets             []setIn `json:"sets"`
}

type bundleOut struct {
	Name     string `json:"name"`
	Package  string `json:"package"`
	Channel  string `json:"channel"`
	Catalog  string `json:"catalog"`
	Replaces string `json:"replaces"`
}

type setOut struct {
	Label         string      `json:"label"`
	Subscriptions int         `json:"subscriptions"`
	FirstMs       float64     `json:"firstMs"`
	MedianMs      float64     `json:"medianMs"`
	P90Ms         float64     `json:"p90Ms"`
	Samples       int         `json:"samples"`
	Bundles       []bundleOut `json:"bundles"`
	// ChannelsSeen lists, per chosen bundle name, every channel the resolver attributed it to
	// over all resolutions of the set. A bundle listed in several channels can be attributed
	// to any of them from one resolution to the next (the candidates of a Subscription without
	// a channel are gathered from a Go map), so one resolution's channel is not the answer.
	ChannelsSeen map[string][]string `json:"channelsSeen"`
	Error        string              `json:"error,omitempty"`
}

// recordChannels adds the channel of every entry to seen (bundle name -> set of channels).
func recordChannels(seen map[string]map[string]bool, entries []*resolvercache.Entry) {
	for _, e := range entries {
		if e.SourceInfo == nil {
			continue
		}
		if seen[e.Name] == nil {
			seen[e.Name] = map[string]bool{}
		}
		seen[e.Name][e.SourceInfo.Channel] = true
	}
}

// clients hands the resolver one gRPC client for the benchmark's CatalogSource.
type clients struct {
	key    registry.CatalogKey
	client client.Interface
}

func (c clients) ClientsForNamespaces(namespaces ...string) map[registry.CatalogKey]client.Interface {
	for _, ns := range namespaces {
		if ns == c.key.Namespace {
			return map[registry.CatalogKey]client.Interface{c.key: c.client}
		}
	}
	return map[registry.CatalogKey]client.Interface{}
}

func main() {
	address := flag.String("address", "127.0.0.1:50051", "operator-registry gRPC address")
	inputPath := flag.String("input", "", "JSON file with the Subscription sets")
	minTime := flag.Duration("min-time", 2*time.Second, "minimum measuring time per set")
	maxSamples := flag.Int("max-samples", 500, "maximum timed resolutions per set")
	flag.Parse()
	if err := run(*address, *inputPath, *minTime, *maxSamples); err != nil {
		fmt.Fprintln(os.Stderr, "resolver-driver:", err)
		os.Exit(2)
	}
}

func run(address, inputPath string, minTime time.Duration, maxSamples int) error {
	raw, err := os.ReadFile(inputPath)
	if err != nil {
		return fmt.Errorf("reading -input: %w", err)
	}
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		return fmt.Errorf("parsing %s: %w", inputPath, err)
	}
	grpcClient, err := client.NewClient(address)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", address, err)
	}
	defer grpcClient.Close()

	indexer := k8scache.NewIndexer(k8scache.MetaNamespaceKeyFunc, k8scache.Indexers{k8scache.NamespaceIndex: k8scache.MetaNamespaceIndexFunc})
	catsrc := &operatorsv1alpha1.CatalogSource{
		ObjectMeta: metav1.ObjectMeta{Name: in.CatalogName, Namespace: in.CatalogNamespace},
		Spec:       operatorsv1alpha1.CatalogSourceSpec{SourceType: operatorsv1alpha1.SourceTypeGrpc, Address: address},
	}
	if err := indexer.Add(catsrc); err != nil {
		return err
	}
	lister := v1alpha1listers.NewCatalogSourceLister(indexer)

	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	provider := clients{key: registry.CatalogKey{Name: in.CatalogName, Namespace: in.CatalogNamespace}, client: grpcClient}

	var results []setOut
	for _, set := range in.Sets {
		// A fresh cache per set, so every set's first resolution includes the catalog snapshot.
		sources := resolver.SourceProviderFromRegistryClientProvider(provider, lister, quiet)
		r := resolver.NewDefaultResolver(resolvercache.New(sources), quiet)
		subs := make([]*operatorsv1alpha1.Subscription, 0, len(set.Subscriptions))
		for _, s := range set.Subscriptions {
			subs = append(subs, &operatorsv1alpha1.Subscription{
				ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: in.Namespace},
				Spec: &operatorsv1alpha1.SubscriptionSpec{
					CatalogSource:          in.CatalogName,
					CatalogSourceNamespace: in.CatalogNamespace,
					Package:                s.Package,
					Channel:                s.Channel,
					StartingCSV:            s.StartingCSV,
				},
			})
		}
		namespaces := []string{in.Namespace, in.CatalogNamespace}
		out := setOut{Label: set.Label, Subscriptions: len(subs)}

		start := time.Now()
		entries, err := r.Resolve(namespaces, subs)
		out.FirstMs = float64(time.Since(start).Nanoseconds()) / 1e6
		if err != nil {
			out.Error = err.Error()
		}
		for _, e := range entries {
			b := bundleOut{Name: e.Name, Replaces: e.Replaces}
			if e.SourceInfo != nil {
				b.Package = e.SourceInfo.Package
				b.Channel = e.SourceInfo.Channel
				b.Catalog = e.SourceInfo.Catalog.Name
			}
			out.Bundles = append(out.Bundles, b)
		}
		sort.Slice(out.Bundles, func(i, j int) bool { return out.Bundles[i].Name < out.Bundles[j].Name })
		seen := map[string]map[string]bool{}
		recordChannels(seen, entries)

		var samples []time.Duration
		measureStart := time.Now()
		for len(samples) < 5 || (time.Since(measureStart) < minTime && len(samples) < maxSamples) {
			t := time.Now()
			again, _ := r.Resolve(namespaces, subs)
			samples = append(samples, time.Since(t))
			recordChannels(seen, again)
		}
		out.ChannelsSeen = map[string][]string{}
		for name, channels := range seen {
			for channel := range channels {
				out.ChannelsSeen[name] = append(out.ChannelsSeen[name], channel)
			}
			sort.Strings(out.ChannelsSeen[name])
		}
		sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
		out.Samples = len(samples)
		out.MedianMs = float64(samples[len(samples)/2].Nanoseconds()) / 1e6
		out.P90Ms = float64(samples[len(samples)*9/10].Nanoseconds()) / 1e6
		results = append(results, out)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"results": results})
}
