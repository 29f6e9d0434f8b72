/*
 * tests/unit/providers/aws/test_ec2_fleet_set.c: the CreateFleet body of a
 * gang's set (all or none, one zone, one type, a placement group).  The
 * expected body is botocore's own ec2 serializer's
 * (botocore.serialize.create_serializer('ec2'), service-2.json 2016-11-15)
 * for the same parameters, compared byte for byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "providers/aws/ec2.h"

static void test_build_create_fleet_set(void **state)
{
    const struct tm_ec2_fleet_override ov[] = {{"p4d.24xlarge", "us-east-1a"},
                                               {"p4d.24xlarge", "us-east-1b"}};
    const struct tm_ec2_tag tags[] = {{"tarmac:cluster", "c1"}};
    struct tm_ec2_fleet_params p = {
        .launch_template = "tarmac-c1", .client_token = "c1-od-100-3", .spot = false, .target = 3,
        .min_target = 3, .overrides = ov, .noverrides = 2, .tags = tags, .ntags = 1,
        .placement_group = "pg-1",
    };
    char *b = NULL;

    (void)state;
    assert_int_equal(tm_ec2_build_create_fleet(&p, &b), 0);
    assert_string_equal(b,
        "Action=CreateFleet&Version=2016-11-15&Type=instant&ClientToken=c1-od-100-3"
        "&OnDemandOptions.AllocationStrategy=lowest-price"
        "&OnDemandOptions.SingleAvailabilityZone=true"
        "&OnDemandOptions.SingleInstanceType=true"
        "&OnDemandOptions.MinTargetCapacity=3"
        "&TargetCapacitySpecification.TotalTargetCapacity=3"
        "&TargetCapacitySpecification.DefaultTargetCapacityType=on-demand"
        "&LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName=tarmac-c1"
        "&LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version=%24Latest"
        "&LaunchTemplateConfigs.1.Overrides.1.InstanceType=p4d.24xlarge"
        "&LaunchTemplateConfigs.1.Overrides.1.AvailabilityZone=us-east-1a"
        "&LaunchTemplateConfigs.1.Overrides.1.Placement.GroupName=pg-1"
        "&LaunchTemplateConfigs.1.Overrides.2.InstanceType=p4d.24xlarge"
        "&LaunchTemplateConfigs.1.Overrides.2.AvailabilityZone=us-east-1b"
        "&LaunchTemplateConfigs.1.Overrides.2.Placement.GroupName=pg-1"
        "&TagSpecification.1.ResourceType=instance"
        "&TagSpecification.1.Tag.1.Key=tarmac%3Acluster&TagSpecification.1.Tag.1.Value=c1");
    free(b);
    b = NULL;

    /* spot: the same three keys under SpotOptions */
    p.spot = true;
    p.placement_group = NULL;
    p.noverrides = 1;
    assert_int_equal(tm_ec2_build_create_fleet(&p, &b), 0);
    assert_non_null(strstr(b, "&SpotOptions.AllocationStrategy=price-capacity-optimized"
                              "&SpotOptions.SingleAvailabilityZone=true"
                              "&SpotOptions.SingleInstanceType=true"
                              "&SpotOptions.MinTargetCapacity=3&"));
    assert_null(strstr(b, "Placement"));
    free(b);
    b = NULL;

    /* a minimum above the target is no request EC2 would take */
    p.min_target = 4;
    assert_int_equal(tm_ec2_build_create_fleet(&p, &b), TM_EINVAL);
    assert_null(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_create_fleet_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
