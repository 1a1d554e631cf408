"""Request bodies of the people routes (users, sign-in, tokens, invites, roles, groups, project access)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator

EMAIL = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
Email = Annotated[str, Field(min_length=3, max_length=320, pattern=EMAIL)]
Name = Annotated[str, Field(min_length=1, max_length=200)]
Id = Annotated[StrictInt, Field(ge=1, le=2**53)]
# A root role by id or by its unique name ("Admin", "Editor", "Viewer" or a custom root role's), as Unleash
# takes it on user creation.
RoleRef = Id | Annotated[StrictStr, Field(min_length=1, max_length=200)]


class SignupBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    email: Email
    name: Name
    password: StrictStr
    username: Name | None = None


class CreateUserBody(BaseModel):
    email: Email
    name: Name | None = None
    username: Name | None = None
    password: StrictStr | None = None
    rootRole: RoleRef = 3


class UpdateUserBody(BaseModel):
    email: Email | None = None
    name: Name | None = None
    username: Name | None = None
    rootRole: RoleRef | None = None


class LoginBody(BaseModel):
    username: Annotated[str, Field(min_length=1, max_length=320)]
    password: Annotated[str, Field(min_length=1, max_length=1024)]


class CreatePersonalTokenBody(BaseModel):
    description: Name
    expiresAt: datetime


class CreateInviteBody(BaseModel):
    name: Name
    expiresAt: datetime


class UpdateInviteBody(BaseModel):
    enabled: StrictBool | None = None
    expiresAt: datetime | None = None


class PermissionItem(BaseModel):
    id: Id | None = None
    name: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    environment: Annotated[str, Field(max_length=100)] | None = None


class RoleBody(BaseModel):
    """Both of SPEC.md's shapes: permission items by `name` or by `id` (with an optional name)."""

    name: Name
    description: Annotated[str, Field(max_length=1000)] | None = ""
    type: StrictStr | None = None
    permissions: list[PermissionItem] = Field(default_factory=list, max_length=1000)

    @field_validator("name")
    @classmethod
    def trimmed(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()


class GroupUser(BaseModel):
    id: Id


class GroupMember(BaseModel):
    user: GroupUser


class GroupBody(BaseModel):
    name: Name
    description: Annotated[str, Field(max_length=1000)] | None = None
    users: list[GroupMember] = Field(default_factory=list, max_length=10_000)


class AccessRole(BaseModel):
    id: Id
    users: list[Id] = Field(default_factory=list, max_length=10_000)
    groups: list[Id] = Field(default_factory=list, max_length=10_000)


class AccessBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    roles: list[AccessRole] = Field(max_length=1000)


class AddAccessBody(BaseModel):
    roles: list[Id] = Field(min_length=1, max_length=1000)
    users: list[Id] = Field(default_factory=list, max_length=10_000)
    groups: list[Id] = Field(default_factory=list, max_length=10_000)
