// Package metrics holds the Prometheus series fleetlift's reconciler and
// worker export on /metrics, named the way Argo CD names its own:
//
//   - fleetlift_campaign_info{id,kind,phase}, fleetlift_campaign_repositories{id,state},
//     fleetlift_campaign_pull_requests{id,state}, fleetlift_campaign_done{id,state},
//     fleetlift_campaign_approvals_waiting{id} and
//     fleetlift_approval_waiting_seconds{id,target}: the recorded state the
//     last reconcile pass read;
//   - fleetlift_reconcile_pass_duration_seconds, fleetlift_reconcile_errors_total{stage},
//     fleetlift_reconcile_last_success_timestamp_seconds (absent until a
//     pass succeeded) and fleetlift_reconcile_leader (1 leading, 0
//     standing by; only in a process that reconciles, see Reconciling);
//   - fleetlift_webhook_deliveries_total{outcome};
//   - fleetlift_sandbox_provision_duration_seconds{provider,outcome};
//   - fleetlift_forge_requests_total{forge,method,code},
//     fleetlift_forge_rate_limit_waits_total{forge} and
//     fleetlift_forge_rate_limit_wait_seconds_total{forge};
//   - fleetlift_notify_deliveries_total{service,event,outcome}: tries to
//     deliver notification messages (delivered, retry, failed);
//   - the Temporal SDK's temporal_* series (TemporalHandler), and the Go
//     runtime's and the process's.
//
// Labels carry ids, names, states and status codes: never a URL, a
// header or anything else that may hold a token.
//
// The package is an adapter: it imports Prometheus and the packages whose
// hooks it fills (reconcile.Observer, webhook.Options.Delivered,
// sandbox.Provider, the forge budget's OnRateLimitWait); nothing but cmd/
// imports it.
package metrics
