package main

import (
	"context"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
)

// deadlockDetection is how long a workflow task's code may run without
// yielding before the SDK fails the task as deadlocked (its default is a
// second). A page of 500 units, and its pull requests' follower, decode
// and encode payloads of a few hundred KiB in the workflow's goroutine:
// on two busy cores, bench-scale at 5,000 repositories saw a follower
// take over a second for it three times, each a failed workflow task
// tried again. Five seconds still catches a workflow blocked for good,
// within the server's 10 s workflow task timeout.
const deadlockDetection = 5 * time.Second

// options are the workers' options: with activityNews, an interceptor
// that calls it as each activity starts and ends.
func (w *workerFlags) options() worker.Options {
	o := worker.Options{DeadlockDetectionTimeout: deadlockDetection}
	if w.activityNews != nil {
		o.Interceptors = []interceptor.WorkerInterceptor{&newsInterceptor{news: w.activityNews}}
	}
	return o
}

// newsInterceptor calls news as each activity starts and ends.
type newsInterceptor struct {
	interceptor.WorkerInterceptorBase
	news func(ended bool)
}

func (n *newsInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &newsActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, news: n.news}
}

type newsActivity struct {
	interceptor.ActivityInboundInterceptorBase
	news func(ended bool)
}

func (a *newsActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	a.news(false)
	defer a.news(true)
	return a.Next.ExecuteActivity(ctx, in)
}
