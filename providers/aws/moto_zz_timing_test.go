//go:build moto

package aws

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	awsmw "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

var opTimes = struct {
	sync.Mutex
	m map[string]time.Duration
	n map[string]int
}{m: map[string]time.Duration{}, n: map[string]int{}}

func timingMW(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("T", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		s := time.Now()
		out, md, err := next.HandleInitialize(ctx, in)
		op := awsmw.GetServiceID(ctx) + ":" + awsmw.GetOperationName(ctx)
		opTimes.Lock()
		opTimes.m[op] += time.Since(s)
		opTimes.n[op]++
		opTimes.Unlock()
		return out, md, err
	}), middleware.Before)
}

func dumpTimes() string {
	opTimes.Lock()
	defer opTimes.Unlock()
	var ks []string
	for k := range opTimes.m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return opTimes.m[ks[i]] > opTimes.m[ks[j]] })
	s := ""
	for _, k := range ks {
		s += fmt.Sprintf("%s n=%d total=%s avg=%s\n", k, opTimes.n[k], opTimes.m[k].Round(time.Millisecond), (opTimes.m[k] / time.Duration(opTimes.n[k])).Round(time.Millisecond))
	}
	clear(opTimes.m)
	clear(opTimes.n)
	return s
}
