package main

import (
	"context"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
)

// options are the workers' options: with activityNews, an interceptor
// that calls it as each activity starts and ends.
func (w *workerFlags) options() worker.Options {
	if w.activityNews == nil {
		return worker.Options{}
	}
	return worker.Options{Interceptors: []interceptor.WorkerInterceptor{&newsInterceptor{news: w.activityNews}}}
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
