"""template.yaml and infra/monitoring.yaml against the code: the resources equal ``awsworld.aws.resources``
(the definitions LocalAWS provisions from), IAM grants explicit actions on this stack's resources only, the
event source and the queue fit together, and the dashboard shows every metric the handlers emit.

``.ci/run`` also runs cfn-lint, ``sam validate --lint`` and ``sam build``; these tests hold the properties a
linter does not know about, so a regression fails CI.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cfnlint.decode.cfn_yaml import load

from awsworld.aws import resources
from awsworld.aws.config import AWSConfig
from awsworld.lambda_host import observability
from awsworld.lambda_host.container import MODULES_ENV
from awsworld.settings import Settings
from awsworld.world import queue as world_queue

ROOT = Path(__file__).resolve().parents[2]
TRACING_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load(str(ROOT / "template.yaml"))


@pytest.fixture(scope="module")
def monitoring() -> dict[str, Any]:
    return load(str(ROOT / "infra" / "monitoring.yaml"))


def props(template: dict[str, Any], name: str) -> dict[str, Any]:
    return template["Resources"][name]["Properties"]


def of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


_REMOVED = object()  # what ``{"Ref": "AWS::NoValue"}`` resolves to: the key or list item is left out


def parameter_values(template: dict[str, Any], parameters: dict[str, str]) -> dict[str, str | list[str]]:
    """Every parameter's value as CloudFormation passes it: the given text or the default, split at commas for a
    ``CommaDelimitedList`` (so an empty one is ``[""]``)."""
    unknown = set(parameters) - set(template["Parameters"])
    assert not unknown, f"the template has no parameter {sorted(unknown)}"
    values: dict[str, str | list[str]] = {}
    for name, spec in template["Parameters"].items():
        text = parameters[name] if name in parameters else str(spec.get("Default", ""))
        values[name] = text.split(",") if spec["Type"] == "CommaDelimitedList" else text
    return values


def _truth(template: dict[str, Any], values: dict[str, str | list[str]]) -> Callable[[Any], bool]:
    """Decides a condition or a rule's assertion with these parameter values (the functions this template uses)."""
    decided: dict[str, bool] = {}

    def operand(node: Any) -> Any:
        if isinstance(node, dict) and set(node) == {"Ref"}:
            return values[node["Ref"]]
        if isinstance(node, dict) and set(node) == {"Fn::Join"}:
            separator, parts = node["Fn::Join"]
            return separator.join(str(part) for part in as_list(operand(parts)))
        return node

    def holds(node: Any) -> bool:
        ((function, arguments),) = node.items()
        if function == "Condition":
            if arguments not in decided:
                decided[arguments] = holds(template["Conditions"][arguments])
            return decided[arguments]
        if function == "Fn::Equals":
            return str(operand(arguments[0])) == str(operand(arguments[1]))
        if function == "Fn::EachMemberEquals":
            return all(member == arguments[1] for member in as_list(operand(arguments[0])))
        if function == "Fn::Not":
            return not holds(arguments[0])
        if function == "Fn::And":
            return all(holds(argument) for argument in arguments)
        if function == "Fn::Or":
            return any(holds(argument) for argument in arguments)
        raise AssertionError(f"a condition function this test does not evaluate: {function}")

    return holds


def resolved(template: dict[str, Any], **parameters: str) -> dict[str, Any]:
    """``template`` as CloudFormation applies it with these parameter values (the others their defaults): each
    ``Fn::If`` replaced by its branch, each ``Fn::FindInMap`` by its value, ``AWS::NoValue`` left out, the
    resources and outputs whose condition is false left out, and a parameter's ``Ref`` replaced by its value.
    Resources' and pseudo parameters' ``Ref``, ``Fn::GetAtt`` and ``Fn::Sub`` stay as written: two resolutions
    compare as deployed stacks would."""
    values = parameter_values(template, parameters)
    holds = _truth(template, values)

    def apply(node: Any) -> Any:
        if isinstance(node, list):
            return [item for item in map(apply, node) if item is not _REMOVED]
        if not isinstance(node, dict):
            return node
        if set(node) == {"Fn::If"}:
            condition, when_true, when_false = node["Fn::If"]
            return apply(when_true if holds({"Condition": condition}) else when_false)
        if set(node) == {"Ref"} and node["Ref"] == "AWS::NoValue":
            return _REMOVED
        if set(node) == {"Ref"} and node["Ref"] in values:
            return values[node["Ref"]]
        if set(node) == {"Fn::FindInMap"}:
            mapping, key, attribute = (apply(part) for part in node["Fn::FindInMap"])
            return template["Mappings"][mapping][str(key)][attribute]
        return {key: item for key, item in ((key, apply(value)) for key, value in node.items()) if item is not _REMOVED}

    def kept(section: dict[str, Any]) -> dict[str, Any]:
        return {name: apply(entry) for name, entry in section.items()
                if "Condition" not in entry or holds({"Condition": entry["Condition"]})}

    return {**template, "Globals": apply(template["Globals"]), "Resources": kept(template["Resources"]),
            "Outputs": kept(template["Outputs"])}


def refusals(template: dict[str, Any], **parameters: str) -> list[str]:
    """What CloudFormation answers a change set with these parameter values: the ``AssertDescription`` of each
    ``Rules`` assertion that fails (none: it goes ahead)."""
    holds = _truth(template, parameter_values(template, parameters))
    return [assertion["AssertDescription"] for rule in template.get("Rules", {}).values()
            for assertion in rule["Assertions"] if not holds(assertion["Assert"])]


# ------------------------------------------------------------------------------------------ storage


def test_the_table_is_exactly_the_one_local_provisions(template: dict[str, Any]) -> None:
    tables = of_type(template, "AWS::DynamoDB::Table")
    assert list(tables) == ["Table"]
    table = props(template, "Table")
    expected = resources.table_properties()
    # Deletion protection: the parameter's default (off: a failed first deploy rolls back) gives LocalAWS's value.
    protection = template["Parameters"]["TableDeletionProtection"]
    assert (protection["Default"], protection["AllowedValues"]) == ("false", ["true", "false"])
    assert template["Conditions"]["TableProtected"] == {"Fn::Equals": [{"Ref": "TableDeletionProtection"}, "true"]}
    assert table["DeletionProtectionEnabled"] == {"Fn::If": ["TableProtected", True, False]}
    assert expected["DeletionProtectionEnabled"] is False
    expected.pop("DeletionProtectionEnabled")
    assert {key: table[key] for key in expected} == expected, "keys, GSIs, TTL, SSE, PITR and billing match"
    assert set(table) - set(expected) <= {"Tags", "DeletionProtectionEnabled"}
    assert table["SSESpecification"]["SSEEnabled"] is True
    assert table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert table["TimeToLiveSpecification"] == {"AttributeName": resources.TTL_ATTRIBUTE, "Enabled": True}


STATEFUL = ("Table", "Bucket", "FlowQueue", "DeadLetterQueue")
"""What holds runs: their event logs, their large values and stream chunks, their messages."""


def test_a_stack_delete_or_a_replacement_keeps_the_runs_table_and_bucket(template: dict[str, Any]) -> None:
    """``sam delete`` (and an update that would replace them) keeps the event logs and the values: Retain on both
    policies. ``RetainExceptOnCreate``: a first deploy that fails and rolls back deletes the empty table and
    bucket it made, instead of leaving a pair behind per attempt (docs/operate/deploy.md, "Removing it")."""
    for name in ("Table", "Bucket"):
        resource = template["Resources"][name]
        assert resource["DeletionPolicy"] == "RetainExceptOnCreate", name
        assert resource["UpdateReplacePolicy"] == "Retain", name


def _parameters_named(value: Any, parameters: set[str]) -> set[str]:
    """The template parameters a property value refers to (``Ref``, or ``${Name}`` in ``Fn::Sub``)."""
    if isinstance(value, dict):
        found = {value["Ref"]} & parameters if isinstance(value.get("Ref"), str) else set()
        if "Fn::Sub" in value:
            text = value["Fn::Sub"] if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"][0]
            found |= set(re.findall(r"\$\{([A-Za-z0-9]+)\}", text)) & parameters
        return found.union(*(_parameters_named(v, parameters) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_parameters_named(v, parameters) for v in value))
    return set()


def test_no_parameter_can_replace_what_holds_runs(template: dict[str, Any]) -> None:
    """A parameter a user may change on a live stack must not reach a property whose change replaces the table,
    the bucket or a queue (a name, a key schema, FIFO): a replaced table or queue is a new, empty one, and the
    runs in flight stay in the old. Only the stage reaches them, as a tag (updated in place), and the flow timeout
    the queue's VisibilityTimeout (SetQueueAttributes: "Update requires: No interruption" in CloudFormation's
    AWS::SQS::Queue reference)."""
    parameters = set(template["Parameters"])
    in_place = {"FlowQueue": {"VisibilityTimeout": {"FlowTimeoutSeconds"}}}
    for name in STATEFUL:
        properties = props(template, name)
        assert not {"TableName", "BucketName", "QueueName", "FifoQueue", "LocalSecondaryIndexes"} & set(properties)
        updated = in_place.get(name, {})
        reached = _parameters_named({k: v for k, v in properties.items() if k != "Tags" and k not in updated},
                                    parameters)
        assert reached == set(), (name, reached)
        for key, allowed in updated.items():
            assert _parameters_named(properties[key], parameters) == allowed, (name, key)
        assert _parameters_named(properties.get("Tags", []), parameters) <= {"Stage"}, name


def _queue_attributes(queue: dict[str, Any]) -> dict[str, str]:
    """CloudFormation queue properties in CreateQueue's string-valued spelling."""
    attributes = {}
    for key, value in queue.items():
        if key == "Tags":
            continue
        if key == "RedrivePolicy":
            value = json.dumps({"deadLetterTargetArn": "DLQ", "maxReceiveCount": value["maxReceiveCount"]})
        attributes[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return attributes


def test_the_queues_are_exactly_the_ones_local_provisions(template: dict[str, Any]) -> None:
    assert set(of_type(template, "AWS::SQS::Queue")) == {"FlowQueue", "DeadLetterQueue"}
    queue = props(resolved(template), "FlowQueue")  # (its VisibilityTimeout: FlowTimeoutSeconds' default's)
    assert _queue_attributes(queue) == resources.queue_attributes("DLQ")
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}
    assert _queue_attributes(props(template, "DeadLetterQueue")) == resources.dlq_attributes()
    for name in ("FlowQueue", "DeadLetterQueue"):
        assert props(template, name)["SqsManagedSseEnabled"] is True


def test_the_queues_visibility_is_six_times_the_flow_timeout_the_code_is_told_for_every_allowed_timeout(
        template: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """``FlowTimeoutSeconds`` sets the flow function's Timeout, tells the code (``AWSWORLD_FLOW_TIMEOUT_SECONDS``) and,
    through the FlowTimeouts mapping, the queue's VisibilityTimeout: six times it, as ``resources.queue_attributes``
    (what LocalAWS provisions) and the dedup markers' horizon compute from the setting. The default is today's
    stack: 120 s and 720 s."""
    parameter = template["Parameters"]["FlowTimeoutSeconds"]
    assert int(parameter["Default"]) == world_queue.FLOW_FUNCTION_TIMEOUT_SECONDS == 120
    assert world_queue.QUEUE_VISIBILITY_TIMEOUT_SECONDS == 720
    allowed = [int(value) for value in parameter["AllowedValues"]]
    assert allowed == sorted(allowed) and allowed[0] == 120 and allowed[-1] == 900  # Lambda's longest
    assert sorted(template["Mappings"]["FlowTimeouts"], key=int) == [str(value) for value in allowed]
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables[Settings.flow_timeout_seconds.env] == {"Ref": "FlowTimeoutSeconds"}
    for timeout in allowed:
        stack = resolved(template, FlowTimeoutSeconds=str(timeout))
        assert int(stack["Resources"]["FlowFunction"]["Properties"]["Timeout"]) == timeout
        visibility = stack["Resources"]["FlowQueue"]["Properties"]["VisibilityTimeout"]
        assert visibility == 6 * timeout
        monkeypatch.setenv(Settings.flow_timeout_seconds.env, str(timeout))
        assert world_queue.flow_function_timeout_seconds() == timeout
        assert resources.queue_attributes("DLQ")["VisibilityTimeout"] == str(visibility)
    monkeypatch.setenv(Settings.flow_timeout_seconds.env, "901")
    with pytest.raises(ValueError, match="from 1 to 900"):
        world_queue.flow_function_timeout_seconds()


def test_the_bucket_is_private_encrypted_and_expires_runs(template: dict[str, Any]) -> None:
    assert list(of_type(template, "AWS::S3::Bucket")) == ["Bucket"]
    bucket = props(template, "Bucket")
    assert bucket["BucketEncryption"] == resources.bucket_encryption()
    assert bucket["PublicAccessBlockConfiguration"] == resources.bucket_public_access_block()
    assert bucket["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    rules = bucket["LifecycleConfiguration"]["Rules"]
    assert rules == resources.bucket_lifecycle_rules(), "the rules LocalAWS provisions, from the expiry classes"
    assert all(rule["Status"] == "Enabled" for rule in rules)
    by_prefix = {rule["Prefix"]: rule for rule in rules if "Prefix" in rule and "TagFilters" not in rule}
    assert by_prefix[resources.QUEUE_PREFIX]["ExpirationInDays"] * 86400 > resources.QUEUE_RETENTION_SECONDS + \
        resources.DLQ_RETENTION_SECONDS, "a queue payload outlives the message that names it, even in the DLQ"
    assert template["Parameters"]["RunRetentionDays"]["MinValue"] >= 1


def test_every_expiry_class_has_its_rule_and_none_expires_an_object_of_a_run_before_its_items() -> None:
    """The S3 half of aws/retention.py: an object tagged with class ``d`` expires ``d`` days after it was
    written, under its run's prefix only; no rule expires a tagged object of a run sooner (S3 applies the
    shortest matching expiration, so the untagged catch-all must be the longest class)."""
    rules = resources.bucket_lifecycle_rules()
    tagged = {rule["TagFilters"][0]["Value"]: rule for rule in rules if "TagFilters" in rule}
    assert list(tagged) == [str(days) for days in resources.EXPIRY_CLASSES_DAYS]
    for value, rule in tagged.items():
        assert rule["TagFilters"] == [{"Key": resources.EXPIRY_TAG, "Value": value}]
        assert (rule["Prefix"], rule["ExpirationInDays"]) == (resources.RUNS_PREFIX, int(value))
    untagged = [rule for rule in rules if rule.get("Prefix") == resources.RUNS_PREFIX and "TagFilters" not in rule]
    assert [rule["ExpirationInDays"] for rule in untagged] == [max(resources.EXPIRY_CLASSES_DAYS)]
    assert len(rules) <= 1000, "S3's limit of rules per bucket"


def test_the_bucket_policy_only_denies_requests_without_tls(template: dict[str, Any]) -> None:
    (policy,) = of_type(template, "AWS::S3::BucketPolicy").values()
    assert policy["Properties"]["Bucket"] == {"Ref": "Bucket"}
    (statement,) = as_list(policy["Properties"]["PolicyDocument"]["Statement"])
    assert statement["Effect"] == "Deny", "the policy grants nothing to anyone"
    assert (statement["Principal"], statement["Action"]) == ("*", "s3:*")
    assert statement["Resource"] == [{"Fn::GetAtt": ["Bucket", "Arn"]}, {"Fn::Sub": "${Bucket.Arn}/*"}]
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_the_queue_policy_only_denies_requests_without_tls(template: dict[str, Any]) -> None:
    """Both queues, as the bucket: a request over plain HTTP is refused whoever makes it, and nothing is granted."""
    (policy,) = of_type(template, "AWS::SQS::QueuePolicy").values()
    assert policy["Properties"]["Queues"] == [{"Ref": "FlowQueue"}, {"Ref": "DeadLetterQueue"}]
    (statement,) = as_list(policy["Properties"]["PolicyDocument"]["Statement"])
    assert statement["Effect"] == "Deny", "the policy grants nothing to anyone"
    assert (statement["Principal"], statement["Action"]) == ("*", "sqs:*")
    assert statement["Resource"] == [{"Fn::GetAtt": ["FlowQueue", "Arn"]}, {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}]
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


# ------------------------------------------------------------------------------------------ functions


def test_the_flow_event_source_reports_batch_item_failures(template: dict[str, Any]) -> None:
    flow = props(template, "FlowFunction")
    (event,) = flow["Events"].values()
    assert event["Type"] == "SQS"
    source = event["Properties"]
    assert source["Queue"] == {"Fn::GetAtt": ["FlowQueue", "Arn"]}
    assert source["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert source["ScalingConfig"]["MaximumConcurrency"] == {"Ref": "FlowMaxConcurrency"}
    assert source["BatchSize"] == {"Ref": "FlowBatchSize"}
    assert source["MaximumBatchingWindowInSeconds"] == {"Ref": "FlowBatchWindowSeconds"}
    parameters = template["Parameters"]
    assert parameters["FlowMaxConcurrency"]["MinValue"] >= 2, "SQS event sources need MaximumConcurrency >= 2"
    assert 1 <= parameters["FlowBatchSize"]["Default"] <= 10, "the default batch needs no batching window"
    assert set(parameters) >= {"Stage", "RunRetentionDays", "FlowMaxConcurrency", "Modules"}


def test_the_handlers_exist_where_the_template_points(template: dict[str, Any]) -> None:
    globals_ = template["Globals"]["Function"]
    assert globals_["Runtime"] == "python3.13"
    code = ROOT / globals_["CodeUri"]
    assert (code / "requirements.txt").is_file(), "sam build installs awsworld from this file"
    for name in ("FlowFunction", "WebhookFunction"):
        module, function = props(template, name)["Handler"].rsplit(".", 1)
        source = (code / f"{module.replace('.', '/')}.py").read_text()
        assert re.search(rf"^from awsworld\.lambda_host\.{module} import {function}$", source, re.M), name


def test_the_webhook_is_a_function_url_without_iam_auth(template: dict[str, Any]) -> None:
    # A sender holds no AWS credentials; the unguessable token is the secret (see awsworld.lambda_host.webhook).
    assert props(template, "WebhookFunction")["FunctionUrlConfig"] == {"AuthType": "NONE"}


def test_the_flow_function_knows_the_webhook_routes_address(template: dict[str, Any]) -> None:
    """A step hands a sender its webhook's URL with ``webhook_url(hook.token)`` (Vercel's ``webhook.url``), which
    reads ``AWSWORLD_WEBHOOK_URL``: before, no function had it, so a workflow on the stack could not say where to
    call back. The flow function runs the steps; the webhook function itself is not given it (a cycle)."""
    from awsworld.authoring.calls import webhook_address

    variables = props(template, "FlowFunction")["Environment"]["Variables"]
    assert variables["AWSWORLD_WEBHOOK_URL"] == {"Fn::GetAtt": ["WebhookFunctionUrl", "FunctionUrl"]}
    assert "AWSWORLD_WEBHOOK_URL" not in props(template, "WebhookFunction").get("Environment", {}).get("Variables", {})
    # the function URL ends in "/", the WebhookUrl output in "webhooks/": either base gives the route's URL
    for base in ("https://abc.lambda-url.us-east-1.on.aws/", "https://abc.lambda-url.us-east-1.on.aws/webhooks/"):
        assert webhook_address(base, "t0k") == "https://abc.lambda-url.us-east-1.on.aws/webhooks/t0k"


def test_the_public_webhook_function_has_a_reserved_concurrency_parameter(template: dict[str, Any]) -> None:
    """A flood on the public URL is capped by default; -1 lifts the reservation (accounts too small to reserve)."""
    parameter = template["Parameters"]["WebhookReservedConcurrency"]
    assert parameter["Type"] == "Number" and 1 <= parameter["Default"] <= 100 and parameter["MinValue"] == -1
    assert props(template, "WebhookFunction")["ReservedConcurrentExecutions"] == {
        "Fn::If": ["WebhookConcurrencyReserved", {"Ref": "WebhookReservedConcurrency"}, {"Ref": "AWS::NoValue"}]}
    assert template["Conditions"]["WebhookConcurrencyReserved"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "WebhookReservedConcurrency"}, -1]}]}
    assert "ReservedConcurrentExecutions" not in props(template, "FlowFunction"), "the flow is capped by its ESM"


def test_the_functions_get_every_variable_the_code_reads(template: dict[str, Any]) -> None:
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["AWSWORLD_TABLE"] == {"Ref": "Table"}
    assert variables["AWSWORLD_BUCKET"] == {"Ref": "Bucket"}
    assert variables["AWSWORLD_QUEUE_URL"] == {"Ref": "FlowQueue"}
    assert variables["AWSWORLD_DLQ_URL"] == {"Ref": "DeadLetterQueue"}
    assert variables[MODULES_ENV] == {"Ref": "Modules"}
    assert variables[observability.TRACING_ENV] == {"Ref": "EnableTracing"}
    assert variables["AWSWORLD_ON_DIVERGENCE"] == {"Ref": "OnDivergence"}
    assert variables["AWSWORLD_RETENTION_DAYS"] == {"Ref": "RunRetentionDays"}
    assert variables["AWSWORLD_MAX_RUN_DAYS"] == {"Ref": "MaxRunDays"}
    assert variables["AWSWORLD_KMS_KEY_ID"] == {"Ref": "PayloadKmsKeyArn"}
    # A parameter, so the app hosts live in samconfig.toml, which `awsworld init --upgrade` keeps (a line added to
    # the template, as the how-to said, was dropped by the upgrade's rewrite); its default is the code's.
    assert variables["AWSWORLD_PUSH_HOSTS"] == {"Ref": "PushHosts"}
    push_hosts = Settings.push_hosts
    assert push_hosts.parse(template["Parameters"]["PushHosts"]["Default"]) == push_hosts.default
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "awsworld"
    assert variables["POWERTOOLS_SERVICE_NAME"] == {"Ref": "AWS::StackName"}
    config = AWSConfig.from_env({name: "7" if name.endswith("_DAYS") else f"<{name}>" for name in variables})
    assert (config.retention_seconds, config.max_run_seconds) == (7 * 86400, 7 * 86400)
    assert (config.table_name, config.bucket_name, config.queue_url, config.dlq_url) == (
        "<AWSWORLD_TABLE>", "<AWSWORLD_BUCKET>", "<AWSWORLD_QUEUE_URL>", "<AWSWORLD_DLQ_URL>")
    # both functions take the same variables (Globals); the flow function also the webhook route's address
    assert "Environment" not in props(template, "WebhookFunction")
    assert set(props(template, "FlowFunction")["Environment"]["Variables"]) == {"AWSWORLD_WEBHOOK_URL"}


# ------------------------------------------------------------------------------------------ IAM


def statements(template: dict[str, Any]) -> Iterator[tuple[str, str | None, dict[str, Any]]]:
    """(resource, condition or None, statement) for every IAM policy statement in the template."""
    for name, resource in template["Resources"].items():
        documents = []
        kind = resource["Type"]
        properties = resource.get("Properties", {})
        if kind == "AWS::IAM::Role":
            documents = [p["PolicyDocument"] for p in properties.get("Policies", [])]
        elif kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            documents = [properties["PolicyDocument"]]
        for document in documents:
            for statement in as_list(document["Statement"]):
                if "Fn::If" in statement:
                    condition, *branches = statement["Fn::If"]
                    for branch in branches:
                        if branch != {"Ref": "AWS::NoValue"}:
                            yield name, condition, branch
                else:
                    yield name, None, statement


def test_iam_grants_no_wildcard_action_or_resource(template: dict[str, Any]) -> None:
    found = list(statements(template))
    assert found, "the roles' policies were found"
    for name, condition, statement in found:
        assert statement["Effect"] == "Allow"
        assert not {"NotAction", "NotResource", "NotPrincipal"} & set(statement), (name, statement)
        actions = as_list(statement["Action"])
        assert all("*" not in action for action in actions), (name, actions)
        if as_list(statement["Resource"]) == ["*"]:
            # X-Ray has no resource-level permissions; the statement exists only when tracing is on. Neither do the
            # network interfaces' Describe actions, and an interface's ID is not known before Lambda makes it: the
            # flow function's role grants them only in a VPC.
            assert (set(actions) <= TRACING_ACTIONS and condition == "TracingEnabled") or (
                actions == NETWORK_INTERFACE_ACTIONS and condition == "InVpc" and name == "FlowFunctionRole"), (
                name, statement)
            continue
        if as_list(statement["Resource"]) == [{"Ref": "PayloadKmsKeyArn"}]:
            # The user's key, only when encryption is on, only for data keys of this stack's table's runs.
            assert set(actions) <= {"kms:GenerateDataKey", "kms:Decrypt"} and condition == "EncryptPayloads"
            assert statement["Condition"] == {"StringEquals": {"kms:EncryptionContext:awsworld:table":
                                                               {"Ref": "Table"}}}, (name, statement)
            continue
        for resource in as_list(statement["Resource"]):
            assert isinstance(resource, dict), f"{name}: {resource!r} must name this stack's resource"
            text = json.dumps(resource)
            assert re.search(r"Table|Queue|Bucket|LogGroup|FlowFunction", text), (name, resource)
            if "*" in text:  # only object keys under the bucket's own prefixes, the table's own indexes, or the
                # flow function's own versions (a pinned run's delivery handed to its version; an operator deleting
                # a retired one)
                assert re.fullmatch(r"\$\{Bucket\.Arn\}/(runs|queue)/\*|\$\{Table\.Arn\}/index/\*"
                                    r"|\$\{FlowFunction\.Arn\}:\*", resource.get("Fn::Sub", "")), resource
            if "FlowFunction" in text:  # invoked by the flow function's own role; deleted only by an operator's
                expected = ["lambda:DeleteFunction"] if name == "OperatorPolicy" else ["lambda:InvokeFunction"]
                assert actions == expected, (name, actions)


def test_functions_use_the_templates_roles_and_no_managed_policy_but_your_step_policies(
        template: dict[str, Any]) -> None:
    """The one managed policy a role may carry is the user's, for their steps (``StepPolicyArns``), on the flow
    function's role alone, and only when given; no AWS managed policy (SAM adds none to a function given a
    ``Role``, VpcConfig or not)."""
    for name in ("FlowFunction", "WebhookFunction", "WorldServerFunction"):
        function = props(template, name)
        assert function["Role"] == {"Fn::GetAtt": [f"{name}Role", "Arn"]}
        assert "Policies" not in function
    for name, role in of_type(template, "AWS::IAM::Role").items():
        expected = STEP_POLICIES_IF_GIVEN if name == "FlowFunctionRole" else None
        assert role["Properties"].get("ManagedPolicyArns") == expected, name


STEP_POLICIES_IF_GIVEN = {"Fn::If": ["StepPoliciesAttached", {"Ref": "StepPolicyArns"}, {"Ref": "AWS::NoValue"}]}
"""The flow function's role's ``ManagedPolicyArns``: the user's policies for their steps, when given."""
NETWORK_INTERFACE_ACTIONS = ["ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets",
                             "ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses",
                             "ec2:UnassignPrivateIpAddresses"]
"""What Lambda does with the role of a function in a VPC: ``AWSLambdaVPCAccessExecutionRole``'s EC2 actions."""
STEP_POLICIES = "arn:aws:iam::123456789012:policy/orders-steps,arn:aws:iam::123456789012:policy/orders-secrets"
IN_A_VPC = {"SubnetIds": "subnet-0a1b2c3d4e5f60718,subnet-0f1e2d3c4b5a69788",
            "SecurityGroupIds": "sg-0123456789abcdef0"}
PAYLOAD_KEY = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def test_the_step_access_parameters_are_empty_lists_by_default(template: dict[str, Any]) -> None:
    """Empty by default, so an existing stack's update and a new user's Enter through ``sam deploy --guided`` keep
    the roles and the functions as they were (the test below checks that empty adds nothing)."""
    for name in ("StepPolicyArns", "SubnetIds", "SecurityGroupIds"):
        parameter = template["Parameters"][name]
        assert (parameter["Type"], parameter["Default"]) == ("CommaDelimitedList", ""), name
        assert "docs/how-to/aws-from-steps.md" in parameter["Description"] or name == "SecurityGroupIds", name
    assert "VPC endpoints or a NAT" in template["Parameters"]["SubnetIds"]["Description"]


@pytest.mark.parametrize("others", [{}, {"WorldServer": "true", "EnableTracing": "true",
                                         "PayloadKmsKeyArn": PAYLOAD_KEY}],
                         ids=["defaults", "world-server-tracing-and-a-payload-key"])
@pytest.mark.parametrize("given", ["StepPolicyArns", "a VPC", "both"])
def test_step_policies_and_a_vpc_reach_the_flow_function_alone_and_add_nothing_else(
        template: dict[str, Any], others: dict[str, str], given: str) -> None:
    """With the parameters empty the stack resolves to what it was before they existed: no managed policy, no
    VpcConfig, no EC2 grant anywhere. Given, the only differences are the user's policies on the flow function's
    role (where steps run; the webhook function and the World server have roles of their own), the flow function's
    VpcConfig (not the webhook's nor the World server's: they run no step) and the network interface grant Lambda
    needs for it."""
    before = resolved(template, **others)
    text = json.dumps([before["Resources"], before["Globals"]])
    assert "ManagedPolicyArns" not in text and "VpcConfig" not in text and '"ec2:' not in text
    parameters = {**({"StepPolicyArns": STEP_POLICIES} if given != "a VPC" else {}),
                  **(IN_A_VPC if given != "StepPolicyArns" else {})}
    after = resolved(template, **others, **parameters)
    role = after["Resources"]["FlowFunctionRole"]["Properties"]
    if "StepPolicyArns" in parameters:
        assert role.pop("ManagedPolicyArns") == STEP_POLICIES.split(",")
    if "SubnetIds" in parameters:
        assert after["Resources"]["FlowFunction"]["Properties"].pop("VpcConfig") == {
            "SubnetIds": IN_A_VPC["SubnetIds"].split(","), "SecurityGroupIds": [IN_A_VPC["SecurityGroupIds"]]}
        (policy,) = role["Policies"]
        statements_of_the_role = policy["PolicyDocument"]["Statement"]
        network = {"Sid": "VpcNetworkInterfaces", "Effect": "Allow", "Action": NETWORK_INTERFACE_ACTIONS,
                   "Resource": "*"}
        assert network in statements_of_the_role
        statements_of_the_role.remove(network)
    assert after == before


WORLD_SERVER_RESOURCES = {"WorldServerFunction", "WorldServerFunctionRole", "WorldServerLogGroup"}
"""What ``WorldServer=true`` adds to the stack (the Function URL, version and alias are SAM's, of the function)."""


@pytest.mark.parametrize("others", [{}, {"EnableTracing": "true", "PayloadKmsKeyArn": PAYLOAD_KEY,
                                         "StepPolicyArns": STEP_POLICIES, **IN_A_VPC}],
                         ids=["defaults", "tracing-a-payload-key-step-policies-and-a-vpc"])
def test_the_world_server_brings_its_own_role_and_log_group_and_changes_nothing_else(
        template: dict[str, Any], others: dict[str, str]) -> None:
    """``WorldServer=true`` adds the World server's function, its role and its log group, each under
    ``WorldServerEnabled``, and no other resource differs: with it false (the default) the stack resolves to what
    it was when the server ran with the flow function's role. The server runs with none of the flow function's
    role, log group, step policies or VPC (it runs no step and consumes no queue); what its role grants is
    test_iam_trace.py's to check."""
    off = resolved(template, **others)["Resources"]
    on = resolved(template, WorldServer="true", **others)["Resources"]
    assert set(on) - set(off) == WORLD_SERVER_RESOURCES and set(off) <= set(on)
    assert {name: on[name] for name in off} == off
    for name in WORLD_SERVER_RESOURCES:
        assert template["Resources"][name]["Condition"] == "WorldServerEnabled", name
    server = on["WorldServerFunction"]["Properties"]
    assert server["Role"] == {"Fn::GetAtt": ["WorldServerFunctionRole", "Arn"]}
    assert server["LoggingConfig"]["LogGroup"] == {"Ref": "WorldServerLogGroup"}
    assert "VpcConfig" not in server
    own = json.dumps([server, on["WorldServerFunctionRole"]])
    assert "FlowFunctionRole" not in own and "FlowLogGroup" not in own and "ManagedPolicyArns" not in own
    assert '"ec2:' not in own and '"lambda:' not in own and "DeadLetterQueue" not in own


@pytest.mark.parametrize(("parameters", "refused"), [
    ({}, False), (IN_A_VPC, False),
    ({"SubnetIds": IN_A_VPC["SubnetIds"]}, True), ({"SecurityGroupIds": IN_A_VPC["SecurityGroupIds"]}, True)],
    ids=["neither", "both", "subnets-alone", "security-groups-alone"])
def test_subnets_and_security_groups_go_together_or_the_change_set_is_refused_saying_so(
        template: dict[str, Any], parameters: dict[str, str], refused: bool) -> None:
    """Security groups alone would be ignored in silence (``InVpc`` reads the subnets) and subnets alone fail
    midway through the deploy (Lambda refuses a function an empty security group): the template's rule refuses the
    change set at once, naming both parameters."""
    answer = refusals(template, **parameters)
    if refused:
        (message,) = answer
        assert "SubnetIds and SecurityGroupIds go together" in message
    else:
        assert answer == []


def test_iam_covers_the_table_and_what_the_event_source_needs(template: dict[str, Any]) -> None:
    """The rest (every action each handler uses, and nothing more) is test_iam_trace.py's job."""
    flow = [s for name, _, s in statements(template) if name == "FlowFunctionRole"]
    resources_text = json.dumps([s["Resource"] for s in flow])
    assert '"Table", "Arn"' in resources_text
    indexes = {r["Fn::Sub"] for s in flow for r in as_list(s["Resource"]) if "/index/" in json.dumps(r)}
    assert indexes == {"${Table.Arn}/index/byDue"}, "run listings (the GSIs) are for clients; the watchdog's index"
    actions = {a for s in flow for a in as_list(s["Action"])}
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility",
            "dynamodb:ConditionCheckItem", "s3:ListBucket"} <= actions


def test_the_watchdog_schedule_sends_the_tick_to_the_flow_queue_with_a_role_that_can_only_do_that(
        template: dict[str, Any]) -> None:
    from awsworld._worker.tick import TICK_BODY, is_tick

    schedule = props(template, "WatchdogSchedule")
    assert schedule["ScheduleExpression"] == {"Ref": "WatchdogRate"}
    assert template["Parameters"]["WatchdogRate"]["Default"] == "rate(1 minute)"
    target = schedule["Target"]
    assert target["Arn"] == {"Fn::GetAtt": ["FlowQueue", "Arn"]}
    assert target["RoleArn"] == {"Fn::GetAtt": ["WatchdogSchedulerRole", "Arn"]}
    assert json.loads(target["Input"]) == json.loads(TICK_BODY) and is_tick({"body": target["Input"]})
    role = props(template, "WatchdogSchedulerRole")
    assert [s["Principal"] for s in role["AssumeRolePolicyDocument"]["Statement"]] == [
        {"Service": "scheduler.amazonaws.com"}]
    grants = [(action, json.dumps(resource)) for name, _, s in statements(template) if name == "WatchdogSchedulerRole"
              for action in as_list(s["Action"]) for resource in as_list(s["Resource"])]
    assert grants == [("sqs:SendMessage", json.dumps({"Fn::GetAtt": ["FlowQueue", "Arn"]}))]


# ------------------------------------------------------------------------------------------ monitoring


def test_monitoring_is_the_nested_infra_template(template: dict[str, Any], monitoring: dict[str, Any]) -> None:
    app = template["Resources"]["Monitoring"]
    assert app["Type"] == "AWS::Serverless::Application"
    assert app["Properties"]["Location"] == "infra/monitoring.yaml"
    passed = set(app["Properties"]["Parameters"])
    required = {name for name, p in monitoring["Parameters"].items() if "Default" not in p}
    assert required <= passed <= set(monitoring["Parameters"])
    assert app["Properties"]["Parameters"]["QueueName"] == {"Fn::GetAtt": ["FlowQueue", "QueueName"]}
    # Dashboards are global to an account: a stack of the same name in another region must not share this one's.
    assert app["Properties"]["Parameters"]["DashboardName"] == {"Fn::Sub": "${AWS::StackName}-${AWS::Region}"}
    assert app["Properties"]["Parameters"]["DeadLetterQueueName"] == {"Fn::GetAtt": ["DeadLetterQueue", "QueueName"]}


def dashboard_body(monitoring: dict[str, Any]) -> dict[str, Any]:
    body = props(monitoring, "Dashboard")["DashboardBody"]["Fn::Sub"]
    return json.loads(re.sub(r"\$\{([^}]+)\}", lambda m: "1800" if "Seconds" in m.group(1) else f"x-{m.group(1)}",
                             body))


def test_the_dashboard_shows_every_awsworld_metric_and_the_aws_ones(monitoring: dict[str, Any]) -> None:
    widgets = dashboard_body(monitoring)["widgets"]
    metrics = [m for w in widgets if w["type"] == "metric" for m in w["properties"]["metrics"]]
    named = {(m[0], m[1]) for m in metrics if isinstance(m[0], str)}
    for name in observability.METRIC_NAMES:
        assert ("x-MetricsNamespace", name) in named, f"{name} is emitted but not on the dashboard"
    assert {("AWS/Lambda", "Errors"), ("AWS/Lambda", "Throttles"), ("AWS/Lambda", "Duration"),
            ("AWS/SQS", "ApproximateNumberOfMessagesVisible"), ("AWS/SQS", "ApproximateAgeOfOldestMessage"),
            ("AWS/DynamoDB", "TransactionConflict"), ("AWS/DynamoDB", "WriteThrottleEvents")} <= named
    expressions = " ".join(m[0]["expression"] for m in metrics if isinstance(m[0], dict))
    assert "ThrottledRequests" in expressions
    queues = {m[3] for m in metrics if m[0] == "AWS/SQS"}
    assert queues == {"x-QueueName", "x-DeadLetterQueueName"}


def watched(alarm: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(namespace, metric, the parameter its first dimension names) of every metric an alarm reads: its own, or
    those of its metric-math expression."""
    properties = alarm["Properties"]
    if "MetricName" in properties:
        namespace = properties["Namespace"]
        return [(namespace if isinstance(namespace, str) else "x-" + namespace["Ref"], properties["MetricName"],
                 properties["Dimensions"][0]["Value"]["Ref"])]
    return [(m["MetricStat"]["Metric"]["Namespace"], m["MetricStat"]["Metric"]["MetricName"],
             m["MetricStat"]["Metric"]["Dimensions"][0]["Value"]["Ref"]) for m in properties["Metrics"]
            if "MetricStat" in m]


def test_alarms_watch_the_dlq_the_oldest_message_function_errors_stuck_runs_and_throttles(
        monitoring: dict[str, Any]) -> None:
    alarms = {alarm: watched(properties) for alarm, properties in of_type(monitoring, "AWS::CloudWatch::Alarm").items()}
    read = {(metric, dimension) for metrics in alarms.values() for _, metric, dimension in metrics}
    assert {("ApproximateNumberOfMessagesVisible", "DeadLetterQueueName"),
            ("ApproximateAgeOfOldestMessage", "QueueName"),
            ("Errors", "FlowFunctionName"), ("Errors", "WebhookFunctionName"),
            ("RunsStuck", "ServiceName")} <= read
    assert set(alarms["ThrottlesAlarm"]) == {
        ("AWS/Lambda", "Throttles", "FlowFunctionName"), ("AWS/Lambda", "Throttles", "WebhookFunctionName"),
        ("AWS/DynamoDB", "ReadThrottleEvents", "TableName"), ("AWS/DynamoDB", "WriteThrottleEvents", "TableName")}
    expression = next(m["Expression"] for m in props(monitoring, "ThrottlesAlarm")["Metrics"] if "Expression" in m)
    assert all(f"FILL({m}, 0)" in expression for m in ("flow", "webhook", "reads", "writes")), expression
    on_dashboard = dashboard_body(monitoring)["widgets"][-1]["properties"]["alarms"]
    assert sorted(on_dashboard) == sorted(f"x-{alarm}.Arn" for alarm in alarms), "every alarm is on the dashboard"


def test_every_awsworld_metric_an_alarm_or_the_dashboard_reads_is_emitted(monitoring: dict[str, Any]) -> None:
    """The converse of the dashboard test above: a name the dashboard plots or an alarm reads that no code emits
    is a flat line, or an alarm that can never fire."""
    widgets = dashboard_body(monitoring)["widgets"]
    plotted = {m[1] for w in widgets if w["type"] == "metric" for m in w["properties"]["metrics"]
               if m[0] == "x-MetricsNamespace"}
    alarmed = {metric for alarm in of_type(monitoring, "AWS::CloudWatch::Alarm").values()
               for namespace, metric, _ in watched(alarm) if namespace == "x-MetricsNamespace"}
    assert plotted | alarmed <= set(observability.METRIC_NAMES), (plotted | alarmed) - set(observability.METRIC_NAMES)


def test_every_alarm_has_a_runbook_line_in_the_monitoring_page(monitoring: dict[str, Any]) -> None:
    """An alarm that pages someone must say what to do: the page's "What to do when an alarm fires" names each
    alarm's resource (``*DLQ not empty* (`DeadLetterQueueAlarm`)``)."""
    page = (ROOT / "docs" / "operate" / "monitoring.md").read_text()
    runbook = page[page.index("What to do when an alarm fires"):]
    missing = [alarm for alarm in of_type(monitoring, "AWS::CloudWatch::Alarm") if f"`{alarm}`" not in runbook]
    assert not missing, f"alarms without a runbook line in docs/operate/monitoring.md: {missing}"


def test_a_divergence_parks_runs_by_default_and_an_alarm_says_so(template: dict[str, Any],
                                                                    monitoring: dict[str, Any]) -> None:
    """A bad deploy must not fail every sleeping run for good (issue 31): runs whose replay diverges are parked by
    default, the spec's fail stays one parameter away, and a parked run cannot go unnoticed: an alarm on the
    ``RunsParked`` metric the flow function emits for every parked delivery."""
    from awsworld.lambda_host import observability

    parameter = template["Parameters"]["OnDivergence"]
    assert parameter["Default"] == "park" and set(parameter["AllowedValues"]) == {"park", "fail"}
    alarms = [a["Properties"] for a in of_type(monitoring, "AWS::CloudWatch::Alarm").values()
              if a["Properties"].get("MetricName") == observability.RUNS_PARKED]
    assert len(alarms) == 1 and alarms[0]["Threshold"] == 0, alarms
    assert alarms[0]["ComparisonOperator"] == "GreaterThanThreshold"
    assert "awsworld runs --parked" in alarms[0]["AlarmDescription"]


def test_a_run_failed_because_its_pinned_version_is_gone_raises_an_alarm(monitoring: dict[str, Any]) -> None:
    """Re-routing (``_worker/rerouting.py``) fails a run whose pinned version cannot be reached after every re-route:
    a lost run must not go unnoticed, so an alarm watches the metric it counts (and the dashboard shows it, with
    the re-routes: the test above checks every metric the functions emit)."""
    from awsworld._worker.rerouting import DEPLOYMENT_MISMATCHES

    alarms = [a["Properties"] for a in of_type(monitoring, "AWS::CloudWatch::Alarm").values()
              if a["Properties"].get("MetricName") == DEPLOYMENT_MISMATCHES]
    assert len(alarms) == 1 and alarms[0]["Threshold"] == 0, alarms
    assert alarms[0]["ComparisonOperator"] == "GreaterThanThreshold"
    assert "awsworld deployments retire" in alarms[0]["AlarmDescription"]


def test_outputs_name_the_webhook_url_and_the_resources(template: dict[str, Any]) -> None:
    outputs = template["Outputs"]
    assert {"WebhookUrl", "TableName", "BucketName", "QueueUrl", "DeadLetterQueueUrl", "ClientEnvironment",
            "ClientPolicyArn", "OperatorPolicyArn", "DashboardUrl"} <= set(outputs)
    assert "WebhookFunctionUrl.FunctionUrl" in outputs["WebhookUrl"]["Value"]["Fn::Sub"]
    environment = outputs["ClientEnvironment"]["Value"]["Fn::Sub"]
    pairs = dict(re.findall(r"(\w+)=(\S+)", environment))
    assert set(pairs) == {"AWSWORLD_TABLE", "AWSWORLD_BUCKET", "AWSWORLD_QUEUE_URL", "AWSWORLD_DLQ_URL",
                          "AWSWORLD_DEPLOYMENT_ID", "AWS_REGION", "AWSWORLD_RETENTION_DAYS", "AWSWORLD_MAX_RUN_DAYS",
                          "AWSWORLD_KMS_KEY_ID", "AWSWORLD_WEBHOOK_URL", "AWSWORLD_FLOW_TIMEOUT_SECONDS"}
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    # a client's idempotency keys stay held as long as the stack's queue may still hand their message out
    # (world.queue.key_horizon_seconds: the visibility timeout, six times the flow function's timeout)
    assert pairs["AWSWORLD_FLOW_TIMEOUT_SECONDS"] == "${FlowTimeoutSeconds}"
    assert pairs["AWSWORLD_DEPLOYMENT_ID"] == "${AWS::StackName}" and \
        variables["AWSWORLD_DEPLOYMENT_ID"] == {"Ref": "AWS::StackName"}, "runs record the stack, wherever made"


def test_samconfig_overrides_name_real_parameters_with_allowed_values(template: dict[str, Any]) -> None:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    parameters = template["Parameters"]
    for env in ("default", "prod"):
        deploy = config[env]["deploy"]["parameters"]
        assert set(deploy["capabilities"].split()) >= {"CAPABILITY_IAM"} and deploy["resolve_s3"] is True
        assert config[env]["build"]["parameters"]["cached"] is False, "src/ changes would not invalidate a cache"
        overrides = dict(re.findall(r'(\w+)="([^"]*)"', deploy["parameter_overrides"]))
        assert overrides and set(overrides) <= set(parameters), env
        for name, value in overrides.items():
            spec = parameters[name]
            if "AllowedValues" in spec:
                assert value in [str(v) for v in spec["AllowedValues"]], (env, name)
            if "AllowedPattern" in spec:
                assert re.fullmatch(spec["AllowedPattern"], value), (env, name)
            if spec["Type"] == "Number":
                assert spec.get("MinValue", float("-inf")) <= float(value) <= spec.get("MaxValue", float("inf"))


def test_the_payload_key_parameter_takes_a_key_arn_and_refuses_an_alias_arn_saying_why(
        template: dict[str, Any]) -> None:
    """The roles' KMS grants name ``PayloadKmsKeyArn`` as their resource, and IAM applies a grant on an alias ARN
    to the alias, not to the key behind it (AWS KMS developer guide, "Use aliases to control access to KMS
    keys"): with ``alias/...`` the stack deployed, then every encrypted run's start failed ``AccessDenied``.
    CloudFormation refuses the value at deploy, with the parameter's ``ConstraintDescription``."""
    spec = template["Parameters"]["PayloadKmsKeyArn"]
    pattern = spec["AllowedPattern"]
    key = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    for accepted in ("", key, key.replace("arn:aws:", "arn:aws-us-gov:")):
        assert re.fullmatch(pattern, accepted), accepted
    for refused in ("arn:aws:kms:eu-west-1:123456789012:alias/payloads", "alias/payloads",
                    "1234abcd-12ab-34cd-56ef-1234567890ab"):
        assert not re.fullmatch(pattern, refused), refused
    assert "not an alias ARN" in spec["ConstraintDescription"] and "describe-key" in spec["ConstraintDescription"]


def test_the_client_policy_is_an_output_and_grants_only_the_clients_calls(template: dict[str, Any]) -> None:
    """A web app's role gets this managed policy: the table (and its listings), waking runs, run values; never
    the DLQ, Lambda or anything outside this stack (test_iam_grants_no_wildcard_action_or_resource)."""
    assert template["Outputs"]["ClientPolicyArn"]["Value"] == {"Ref": "ClientPolicy"}
    client = [s for name, _, s in statements(template) if name == "ClientPolicy"]
    actions = {a for s in client for a in as_list(s["Action"])}
    assert actions == {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem",
                       "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem",
                       "sqs:SendMessage", "s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject",
                       "s3:ListBucket", "kms:GenerateDataKey", "kms:Decrypt"}
    text = json.dumps([s["Resource"] for s in client])
    assert "DeadLetterQueue" not in text and "/index/*" not in text, "the two indexes a listing reads, by name"
    assert "/index/byWorkflow" in text and "/index/byStatus" in text and "/index/byDue" not in text
    assert "AWSWORLD_RETENTION_DAYS=${RunRetentionDays}" in template["Outputs"]["ClientEnvironment"]["Value"]["Fn::Sub"]


def test_the_operator_policy_is_an_output_and_holds_the_clients_grants_the_dlq_and_retired_versions(
        template: dict[str, Any]) -> None:
    """The on-call role gets this managed policy alone: every grant of ``ClientPolicy`` (an operator starts, reads,
    resumes and cancels runs too), the DLQ
    (``awsworld dlq`` and its redrive), and deleting the flow function's versions (``awsworld deployments
    retire``); nothing else (test_iam_trace.py checks that an operator command uses each)."""
    assert template["Outputs"]["OperatorPolicyArn"]["Value"] == {"Ref": "OperatorPolicy"}
    assert template["Resources"]["OperatorPolicy"]["Type"] == "AWS::IAM::ManagedPolicy"

    def grants(policy: str) -> set[tuple[str, str, str | None]]:
        return {(action, json.dumps(resource), condition) for name, condition, s in statements(template)
                if name == policy for action in as_list(s["Action"]) for resource in as_list(s["Resource"])}

    def index(name: str) -> str:
        return json.dumps({"Fn::Sub": f"${{Table.Arn}}/index/{name}"})

    def arn(name: str) -> str:
        return json.dumps({"Fn::GetAtt": [name, "Arn"]})

    operator, client = grants("OperatorPolicy"), grants("ClientPolicy")
    assert client <= operator
    assert operator - client == {
        ("sqs:GetQueueAttributes", arn("FlowQueue"), None), ("sqs:ReceiveMessage", arn("DeadLetterQueue"), None),
        ("sqs:ChangeMessageVisibility", arn("DeadLetterQueue"), None),
        ("sqs:GetQueueAttributes", arn("DeadLetterQueue"), None), ("sqs:DeleteMessage", arn("DeadLetterQueue"), None),
        ("lambda:DeleteFunction", json.dumps({"Fn::Sub": "${FlowFunction.Arn}:*"}), None)}


_TRANSFORM = """
import json, sys
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse
document = yaml_parse(sys.stdin.read().replace("CodeUri: handlers/", "CodeUri: s3://bucket/code.zip"))
document["Resources"]["Monitoring"]["Properties"]["Location"] = "https://s3.amazonaws.com/bucket/monitoring.yaml"
class NoManagedPolicies:
    def load(self):
        return {}
print(json.dumps(transform(document, {}, NoManagedPolicies())["Resources"]))
"""


def test_snapstart_is_on_by_default(template: dict[str, Any]) -> None:
    parameter = template["Parameters"]["SnapStart"]
    assert parameter["Default"] == "PublishedVersions"
    assert set(parameter["AllowedValues"]) == {"PublishedVersions", "None"}
    globals_ = template["Globals"]["Function"]
    assert globals_["AutoPublishAlias"] == "live"
    assert globals_["SnapStart"] == {"ApplyOn": {"Ref": "SnapStart"}}


@pytest.mark.sam
def test_the_event_source_and_the_url_invoke_the_alias() -> None:
    """SnapStart applies to published versions only: every deployment publishes one behind the "live" alias,
    and what invokes the functions (the SQS event source, the Function URL and its permissions) must name the
    alias, or it would run $LATEST without SnapStart. Checked on the template as SAM transforms it. The versions
    a deploy publishes stay when the next deploy publishes its own (SAM's ``DeletionPolicy: Retain``): the runs
    pinned to one keep running on it (lambda_host/versions.py) until ``awsworld deployments prune`` deletes it."""
    python = ROOT / ".venv-tools" / "bin" / "python"
    if not python.exists():
        pytest.skip(f"the SAM tools venv is missing ({python.parent.parent}: .ci/run creates it)")
    done = subprocess.run([str(python), "-c", _TRANSFORM], input=(ROOT / "template.yaml").read_text(),
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ.get("PATH", ""), "AWS_DEFAULT_REGION": "us-east-1"})
    assert done.returncode == 0, done.stderr[-3000:]
    resources = json.loads(done.stdout)
    aliases = {name for name, r in resources.items() if r["Type"] == "AWS::Lambda::Alias"}
    # (the World server, awsworld serve behind an IAM-authenticated URL, exists with WorldServer=true)
    assert aliases == {"FlowFunctionAliaslive", "WebhookFunctionAliaslive", "WorldServerFunctionAliaslive"}
    (mapping,) = [r for r in resources.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    assert mapping["Properties"]["FunctionName"] == {"Ref": "FlowFunctionAliaslive"}
    urls = sorted(r["Properties"]["TargetFunctionArn"]["Ref"] for r in resources.values()
                  if r["Type"] == "AWS::Lambda::Url")
    assert urls == ["WebhookFunctionAliaslive", "WorldServerFunctionAliaslive"]
    permissions = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::Permission"]
    assert permissions and all(p["FunctionName"] in ({"Ref": "WebhookFunctionAliaslive"},
                                                     {"Ref": "WorldServerFunctionAliaslive"}) for p in permissions)
    versions = [r for r in resources.values() if r["Type"] == "AWS::Lambda::Version"]
    assert len(versions) == 3 and all(v["DeletionPolicy"] == "Retain" for v in versions), versions
    for name in ("FlowFunction", "WebhookFunction", "WorldServerFunction"):
        assert resources[name]["Properties"]["Runtime"] == "python3.13"
        assert resources[name]["Properties"]["SnapStart"] == {"ApplyOn": {"Ref": "SnapStart"}}
