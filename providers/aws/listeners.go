package aws

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
)

// reconcileListeners converges the NLB's listeners, each forwarding to its target group, and
// the target groups with their targets; then deletes what is no longer wanted.
func (p *Provider) reconcileListeners(ctx context.Context, d desiredLB, rec *lbRecord, vpc string, instances []string) error {
	byPort, err := p.listenersByPort(ctx, rec)
	if err != nil {
		return err
	}
	attached, err := p.targetGroupsOf(ctx, rec.ARN)
	if err != nil {
		return err
	}
	byName := map[string]elbv2types.TargetGroup{}
	for _, tg := range attached {
		byName[aws.ToString(tg.TargetGroupName)] = tg
	}

	wantTG := map[string]bool{}
	wantPort := map[int32]bool{}
	for _, l := range d.NLB.Listeners {
		wantTG[l.TG.Name] = true
		wantPort[l.Port] = true
		tgARN, err := p.reconcileTargetGroup(ctx, d, l.TG, vpc, byName, instances)
		if err != nil {
			return err
		}
		rec.TargetGroups = append(rec.TargetGroups, tgARN)
		cur, ok := byPort[l.Port]
		if err := p.reconcileListener(ctx, rec, l, tgARN, cur, ok); err != nil {
			return err
		}
	}
	return p.deleteUnwantedListeners(ctx, rec, byPort, wantPort, byName, wantTG)
}

// listenersByPort lists the NLB's listeners by port.
func (p *Provider) listenersByPort(ctx context.Context, rec *lbRecord) (map[int32]elbv2types.Listener, error) {
	byPort := map[int32]elbv2types.Listener{}
	pager := elbv2.NewDescribeListenersPaginator(p.api.listeners, &elbv2.DescribeListenersInput{LoadBalancerArn: aws.String(rec.ARN)})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing listeners of %s: %w", rec.Name, err)
		}
		for _, l := range page.Listeners {
			byPort[aws.ToInt32(l.Port)] = l
		}
	}
	return byPort, nil
}

// reconcileTargetGroup converges one listener's target group (byName: the groups attached now),
// its targets and its attributes, and returns its ARN.
func (p *Provider) reconcileTargetGroup(ctx context.Context, d desiredLB, tg targetGroupSpec, vpc string, byName map[string]elbv2types.TargetGroup, instances []string) (string, error) {
	tgARN, err := p.ensureTargetGroup(ctx, d, tg, vpc, byName)
	if err != nil {
		return "", err
	}
	if err := p.reconcileTargets(ctx, tgARN, tg.Name, instances); err != nil {
		return "", err
	}
	if err := p.reconcileTargetGroupAttributes(ctx, tgARN, tg.Name, tg.Attributes); err != nil {
		return "", err
	}
	return tgARN, nil
}

// reconcileListener converges the listener of l (cur, when exists) to forward to tgARN:
// created, recreated when its protocol changes, or modified in place.
func (p *Provider) reconcileListener(ctx context.Context, rec *lbRecord, l nlbListener, tgARN string, cur elbv2types.Listener, exists bool) error {
	switch {
	case !exists:
		return p.createListener(ctx, rec, l, tgARN)
	case string(cur.Protocol) != l.Protocol:
		// AWS cannot turn every protocol into every other in place (UDP never); recreate.
		if _, err := p.api.listeners.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: cur.ListenerArn}); err != nil {
			return fmt.Errorf("deleting listener %d of %s to change its protocol: %w", l.Port, rec.Name, err)
		}
		return p.createListener(ctx, rec, l, tgARN)
	case listenerDiffers(cur, l, tgARN):
		in := &elbv2.ModifyListenerInput{ListenerArn: cur.ListenerArn, DefaultActions: forward(tgARN)}
		if l.Protocol == "TLS" {
			in.Certificates, in.SslPolicy, in.AlpnPolicy = tlsSettings(l)
		}
		if _, err := p.api.listeners.ModifyListener(ctx, in); err != nil {
			return fmt.Errorf("modifying listener %d of %s: %w", l.Port, rec.Name, err)
		}
	}
	return nil
}

// deleteUnwantedListeners deletes the listeners on ports not wanted, then the target groups
// not wanted (a group is deleted once no listener forwards to it).
func (p *Provider) deleteUnwantedListeners(ctx context.Context, rec *lbRecord, byPort map[int32]elbv2types.Listener, wantPort map[int32]bool,
	byName map[string]elbv2types.TargetGroup, wantTG map[string]bool) error {
	for port, l := range byPort {
		if wantPort[port] {
			continue
		}
		if _, err := p.api.listeners.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: l.ListenerArn}); err != nil && !isCode(err, "ListenerNotFound") {
			return fmt.Errorf("deleting listener %d of %s: %w", port, rec.Name, err)
		}
	}
	for name, tg := range byName {
		if !wantTG[name] {
			if err := p.deleteTargetGroup(ctx, aws.ToString(tg.TargetGroupArn)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *Provider) createListener(ctx context.Context, rec *lbRecord, l nlbListener, tgARN string) error {
	in := &elbv2.CreateListenerInput{
		LoadBalancerArn: aws.String(rec.ARN),
		Port:            aws.Int32(l.Port),
		Protocol:        elbv2types.ProtocolEnum(l.Protocol),
		DefaultActions:  forward(tgARN),
		Tags:            toELBv2Tags(rec.Tags),
	}
	if l.Protocol == "TLS" {
		in.Certificates, in.SslPolicy, in.AlpnPolicy = tlsSettings(l)
	}
	if _, err := p.api.listeners.CreateListener(ctx, in); err != nil {
		return fmt.Errorf("creating listener %s:%d of %s: %w", l.Protocol, l.Port, rec.Name, err)
	}
	return nil
}

// tlsSettings are a TLS listener's certificate, SSL policy and ALPN policy (none when unset).
func tlsSettings(l nlbListener) ([]elbv2types.Certificate, *string, []string) {
	var alpn []string
	if l.ALPN != "" {
		alpn = []string{l.ALPN}
	}
	return []elbv2types.Certificate{{CertificateArn: aws.String(l.CertARN)}}, aws.String(l.SSLPolicy), alpn
}

// listenerDiffers compares what a listener holds with what it should. The SSL policy is
// compared for TLS listeners only (moto reports one on every listener).
func listenerDiffers(cur elbv2types.Listener, l nlbListener, tgARN string) bool {
	if len(cur.DefaultActions) != 1 || aws.ToString(cur.DefaultActions[0].TargetGroupArn) != tgARN {
		return true
	}
	if l.Protocol != "TLS" {
		return false
	}
	if aws.ToString(cur.SslPolicy) != l.SSLPolicy {
		return true
	}
	// An unset ALPN policy reads back as none or ["None"].
	if l.ALPN != "" && !slices.Equal(cur.AlpnPolicy, []string{l.ALPN}) && !(l.ALPN == "None" && len(cur.AlpnPolicy) == 0) {
		return true
	}
	return len(cur.Certificates) == 0 || aws.ToString(cur.Certificates[0].CertificateArn) != l.CertARN
}

func forward(tgARN string) []elbv2types.Action {
	return []elbv2types.Action{{Type: elbv2types.ActionTypeEnumForward, TargetGroupArn: aws.String(tgARN)}}
}
