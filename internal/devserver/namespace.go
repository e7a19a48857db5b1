package devserver

import (
	"context"
	"errors"
	"fmt"
	"sort"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	persistencespb "go.temporal.io/server/api/persistence/v1"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence"
	"go.temporal.io/server/common/persistence/serialization"
	persistencesql "go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/resolver"
	"go.temporal.io/server/common/searchattribute/sadefs"
	sqliteschema "go.temporal.io/server/schema/sqlite"
)

// clusterName is the embedded server's one cluster.
const clusterName = "active"

// ensureNamespace makes sure the database cfg names holds fleetlift's
// namespace with the search attributes attrs: it creates the namespace
// when missing and adds the attributes it lacks, through Temporal's own
// metadata store, before the server reads namespaces. It returns what it
// did.
func ensureNamespace(cfg *config.SQL, attrs map[string]enumspb.IndexedValueType) ([]string, error) {
	ctx := context.Background()
	serializer := serialization.NewSerializer()
	factory := persistencesql.NewFactory(*cfg, resolver.NewNoopResolver(), clusterName, log.NewNoopLogger(), metrics.NoopMetricsHandler, serializer)
	defer factory.Close()
	store, err := factory.NewMetadataStore()
	if err != nil {
		return nil, fmt.Errorf("open namespaces: %w", err)
	}
	mgr := persistence.NewMetadataManagerImpl(store, serializer, log.NewNoopLogger(), clusterName)
	got, err := mgr.GetNamespace(ctx, &persistence.GetNamespaceRequest{Name: Namespace})
	var notFound *serviceerror.NamespaceNotFound
	switch {
	case errors.As(err, &notFound):
		return createNamespace(ctx, mgr, attrs)
	case err != nil:
		return nil, fmt.Errorf("read namespace %s: %w", Namespace, err)
	}
	return addSearchAttributes(ctx, mgr, got, attrs)
}

// createNamespace registers fleetlift's namespace.
func createNamespace(ctx context.Context, mgr persistence.MetadataManager, attrs map[string]enumspb.IndexedValueType) ([]string, error) {
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, Namespace, false, attrs)
	if err != nil {
		return nil, fmt.Errorf("namespace config: %w", err)
	}
	if _, err := mgr.CreateNamespace(ctx, &persistence.CreateNamespaceRequest{Namespace: ns.Detail, IsGlobalNamespace: ns.IsGlobal}); err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", Namespace, err)
	}
	return []string{fmt.Sprintf("created namespace %s with fleetlift's search attributes", Namespace)}, nil
}

// addSearchAttributes gives the namespace the search attributes of attrs
// it lacks, each on a free column of its type.
func addSearchAttributes(ctx context.Context, mgr persistence.MetadataManager, got *persistence.GetNamespaceResponse, attrs map[string]enumspb.IndexedValueType) ([]string, error) {
	cfg := got.Namespace.GetConfig()
	if cfg == nil {
		cfg = &persistencespb.NamespaceConfig{}
		got.Namespace.Config = cfg
	}
	if cfg.CustomSearchAttributeAliases == nil {
		cfg.CustomSearchAttributeAliases = map[string]string{}
	}
	added, err := assignColumns(cfg.CustomSearchAttributeAliases, attrs)
	if err != nil || len(added) == 0 {
		return nil, err
	}
	meta, err := mgr.GetMetadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("add search attributes to namespace %s: %w", Namespace, err)
	}
	if err := mgr.UpdateNamespace(ctx, &persistence.UpdateNamespaceRequest{
		Namespace: got.Namespace, IsGlobalNamespace: got.IsGlobalNamespace, NotificationVersion: meta.NotificationVersion,
	}); err != nil {
		return nil, fmt.Errorf("add search attributes to namespace %s: %w", Namespace, err)
	}
	return []string{fmt.Sprintf("added search attributes %v to namespace %s", added, Namespace)}, nil
}

// assignColumns adds to aliases (column → attribute name) each attribute
// of attrs it lacks, on the first free column of the attribute's type,
// and returns their names. An attribute already there on a column of
// another type is an error: runs recorded with it would be misread.
func assignColumns(aliases map[string]string, attrs map[string]enumspb.IndexedValueType) ([]string, error) {
	columnType := sadefs.GetDBIndexSearchAttributes(nil).CustomSearchAttributes
	columns := make([]string, 0, len(columnType))
	for c := range columnType {
		columns = append(columns, c)
	}
	sort.Strings(columns)
	columnOf := map[string]string{}
	for c, name := range aliases {
		columnOf[name] = c
	}
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, name)
	}
	sort.Strings(names)
	var added []string
	for _, name := range names {
		typ := attrs[name]
		if c, ok := columnOf[name]; ok {
			if columnType[c] != typ {
				return nil, fmt.Errorf("search attribute %s of namespace %s is a %s (column %s); fleetlift needs a %s", name, Namespace, columnType[c], c, typ)
			}
			continue
		}
		free := ""
		for _, c := range columns {
			if _, used := aliases[c]; !used && columnType[c] == typ {
				free = c
				break
			}
		}
		if free == "" {
			return nil, fmt.Errorf("add search attribute %s to namespace %s: no free %s column", name, Namespace, typ)
		}
		aliases[free] = name
		added = append(added, name)
	}
	return added, nil
}
