"""Request bodies of the admin and client API, as pydantic models.

They drive both validation (a failure names the field at fault) and the OpenAPI document. Unknown keys
are ignored, as Unleash ignores them on most routes. Numbers that are stored are bounded to what their
column holds on both backends, so a huge one is a 400 naming the field, never a database error.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
)

from flagproxy.server.clock import to_iso

# Every operator the evaluator supports (decision E1): SPEC.md's 15 plus SEMVER_GTE/LTE, REGEX, IN_CIDR.
Operator = Literal[
    "NOT_IN", "IN", "STR_ENDS_WITH", "STR_STARTS_WITH", "STR_CONTAINS",
    "NUM_EQ", "NUM_GT", "NUM_GTE", "NUM_LT", "NUM_LTE",
    "DATE_AFTER", "DATE_BEFORE",
    "SEMVER_EQ", "SEMVER_GT", "SEMVER_LT", "SEMVER_GTE", "SEMVER_LTE",
    "REGEX", "IN_CIDR",
]  # fmt: skip

# Unleash's "URL friendly" names: what survives encodeURIComponent unchanged.
UrlName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9\-_.~]+$")]
TagText = Annotated[str, Field(min_length=2, max_length=50)]
Weight = Annotated[int, Field(ge=0, le=1000)]
SortOrder = Annotated[StrictInt, Field(ge=-(2**31), le=2**31 - 1)]  # an INTEGER column
SegmentId = Annotated[StrictInt, Field(ge=0, le=2**63 - 1)]  # a BIGINT key
Count = Annotated[int, Field(ge=0, le=2**53 - 1)]  # the largest integer every SDK's JSON writes exactly
ParameterValue = StrictStr | StrictInt | StrictFloat | StrictBool


class Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ConstraintBody(Body):
    contextName: StrictStr = Field(min_length=1)
    operator: Operator
    values: list[StrictStr] | None = None
    value: StrictStr | None = None
    inverted: StrictBool = False
    caseInsensitive: StrictBool = False


class PayloadBody(Body):
    type: Literal["json", "csv", "string", "number"]
    value: StrictStr


class OverrideBody(Body):
    contextName: StrictStr = Field(min_length=1)
    values: list[StrictStr]


class StrategyVariantBody(Body):
    name: StrictStr = Field(min_length=1)
    weight: Weight = 0
    weightType: Literal["variable", "fix"] = "variable"
    stickiness: StrictStr = "default"
    payload: PayloadBody | None = None


class VariantBody(StrategyVariantBody):
    overrides: list[OverrideBody] = []


class VariantList(BaseModel):
    """The body of PUT .../variants: a bare JSON array, as in Unleash."""

    variants: list[VariantBody]


class StrategyBody(Body):
    name: StrictStr = Field(min_length=1)
    title: StrictStr | None = None
    disabled: StrictBool | None = False
    sortOrder: SortOrder | None = None
    parameters: dict[str, ParameterValue] = {}
    constraints: list[ConstraintBody] = []
    variants: list[StrategyVariantBody] = []
    segments: list[SegmentId] = []


class SortOrderItem(Body):
    """One item of POST .../strategies/set-sort-order."""

    id: StrictStr
    sortOrder: SortOrder


class TagBody(Body):
    type: TagText = "simple"
    value: TagText


class CreateFeatureBody(Body):
    name: UrlName
    type: Literal["release", "experiment", "operational", "kill-switch", "permission", "sunset"] = "release"
    description: StrictStr | None = None
    impressionData: StrictBool = False
    tags: list[TagBody] | None = None


class UpdateFeatureBody(Body):
    name: StrictStr | None = None
    type: Literal["release", "experiment", "operational", "kill-switch", "permission", "sunset"] | None = None
    description: StrictStr | None = None
    impressionData: StrictBool | None = None
    stale: StrictBool | None = None
    archived: StrictBool | None = None


class DependencyBody(Body):
    feature: StrictStr = Field(min_length=1)
    enabled: StrictBool = True
    variants: list[StrictStr] = []


class SegmentBody(Body):
    name: StrictStr = Field(min_length=1)
    description: StrictStr | None = None
    project: StrictStr | None = None
    constraints: list[ConstraintBody]


class SegmentUpdateBody(Body):
    """Every field optional: what is left out stays as it is (SPEC.md)."""

    name: StrictStr | None = Field(default=None, min_length=1)
    description: StrictStr | None = None
    project: StrictStr | None = None
    constraints: list[ConstraintBody] | None = None


class CreateTokenBody(Body):
    tokenName: StrictStr | None = Field(default=None, min_length=1)
    username: StrictStr | None = Field(default=None, min_length=1)  # Unleash's older name for tokenName
    type: StrictStr
    environment: StrictStr | None = None
    projects: list[StrictStr] | None = Field(default=None, min_length=1)
    project: StrictStr | None = None
    expiresAt: datetime | None = None

    @field_validator("expiresAt")
    @classmethod
    def _representable_in_utc(cls, value: datetime | None) -> datetime | None:
        if value is not None:
            try:
                to_iso(value)
            except OverflowError:
                raise ValueError("must be a moment between the years 1 and 9999 in UTC") from None
        return value


class CreateEnvironmentBody(Body):
    name: UrlName
    type: StrictStr = Field(min_length=1)
    sortOrder: SortOrder = 9999
    enabled: StrictBool = True


class CreateProjectBody(Body):
    id: UrlName
    name: StrictStr = Field(min_length=1)
    description: StrictStr | None = None


class UpdateProjectBody(Body):
    """Unleash's updateProjectSchema: the id is the path's; `description` left out stays as it is."""

    name: StrictStr = Field(min_length=1, max_length=200)
    description: StrictStr | None = None


class ToggleCounts(Body):
    yes: Count = 0
    no: Count = 0
    variants: dict[str, Count] = {}


class MetricsBucket(Body):
    start: Any = None
    stop: Any = None
    toggles: dict[str, ToggleCounts]


class ClientMetricsBody(Body):
    appName: StrictStr = Field(min_length=1)
    instanceId: StrictStr | None = None
    environment: StrictStr | None = None
    bucket: MetricsBucket


class ClientRegisterBody(Body):
    appName: StrictStr = Field(min_length=1)
    instanceId: StrictStr | None = None
    sdkVersion: StrictStr | None = None
    environment: StrictStr | None = None
    strategies: list[StrictStr] = []
    interval: StrictInt | StrictFloat | None = None  # ms
    started: StrictStr | StrictInt | StrictFloat | None = None

    @field_validator("interval")
    @classmethod
    def _interval_in_range(cls, value: float | None) -> float | None:
        if value is not None and not 0 <= value <= 2**53 - 1:
            raise ValueError("must be a number of milliseconds from 0 to 2^53 - 1")
        return value
