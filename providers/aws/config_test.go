package aws

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

const (
	testCluster = "portico-test"
	testRegion  = "us-east-1"
)

// awsConfig is an SDK configuration with static credentials for an endpoint (moto's, or a
// test server replaying recorded AWS responses).
func awsConfig(url string) aws.Config {
	return aws.Config{
		Region:       testRegion,
		Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		BaseEndpoint: aws.String(url),
	}
}
