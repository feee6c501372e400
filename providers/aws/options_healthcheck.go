package aws

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/portico-lb/portico/annotations"
)

// Rules of the health-check keys (both kinds).

func parseHealthCheckProtocol(v string, o *ServiceOptions) []annotations.Problem {
	p := strings.ToUpper(v)
	switch p {
	case "TCP", "HTTP", "HTTPS":
		o.HealthCheck.Protocol = p
		return nil
	}
	return []annotations.Problem{{Bad: v, Detail: `must be one of "TCP", "HTTP", "HTTPS" (any case)`}}
}

func parseHealthCheckPort(v string, o *ServiceOptions) []annotations.Problem {
	if v == "traffic-port" {
		o.HealthCheck.Port = v
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 {
		return []annotations.Problem{{Bad: v, Detail: `must be "traffic-port" or a port number from 1 to 65535`}}
	}
	o.HealthCheck.Port = strconv.Itoa(n)
	return nil
}

const maxHealthCheckPathLen = 1024

func parseHealthCheckPath(v string, o *ServiceOptions) []annotations.Problem {
	if !strings.HasPrefix(v, "/") || len(v) > maxHealthCheckPathLen ||
		strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return []annotations.Problem{{Bad: v, Detail: fmt.Sprintf(`must be a path starting with "/", at most %d characters, without whitespace`, maxHealthCheckPathLen)}}
	}
	o.HealthCheck.Path = v
	return nil
}

func parseThreshold(v string) (*int32, []annotations.Problem) {
	n, probs := annotations.ParseInt(v, 2, 10, "number of checks")
	if probs != nil {
		return nil, probs
	}
	t := int32(n)
	return &t, nil
}

func parseHealthyThreshold(v string, o *ServiceOptions) []annotations.Problem {
	t, probs := parseThreshold(v)
	o.HealthCheck.HealthyThreshold = t
	return probs
}

func parseUnhealthyThreshold(v string, o *ServiceOptions) []annotations.Problem {
	t, probs := parseThreshold(v)
	o.HealthCheck.UnhealthyThreshold = t
	return probs
}

func parseHealthCheckTimeout(v string, o *ServiceOptions) []annotations.Problem {
	d, probs := annotations.ParseSeconds(v, 2, 120)
	o.HealthCheck.Timeout = d
	return probs
}

func parseHealthCheckInterval(v string, o *ServiceOptions) []annotations.Problem {
	d, probs := annotations.ParseSeconds(v, 5, 300)
	o.HealthCheck.Interval = d
	return probs
}
