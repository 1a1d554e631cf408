"""Permissions as data: Unleash's permission names, the built-in roles, and what each admin route needs.

Every non-GET route under /api/admin must be in ROUTE_NEEDS (create_app refuses to start otherwise, and
tests/server/test_permission_matrix.py walks the route table), so no route can be added without saying who
may call it. GET routes need a signed-in user or an admin token and no permission (a Viewer reads
everything), except those in READ_NEEDS (API token secrets).
"""

from __future__ import annotations

from dataclasses import dataclass

ADMIN = "ADMIN"

ROOT_PERMISSIONS = frozenset(
    {
        ADMIN,
        "CREATE_STRATEGY",
        "UPDATE_STRATEGY",
        "DELETE_STRATEGY",
        "CREATE_ADDON",
        "UPDATE_ADDON",
        "DELETE_ADDON",
        "UPDATE_APPLICATION",
        "CREATE_TAG_TYPE",
        "UPDATE_TAG_TYPE",
        "DELETE_TAG_TYPE",
        "CREATE_PROJECT",
        "CREATE_CONTEXT_FIELD",
        "UPDATE_CONTEXT_FIELD",
        "DELETE_CONTEXT_FIELD",
        "READ_ROLE",
        "CREATE_SEGMENT",
        "UPDATE_SEGMENT",
        "DELETE_SEGMENT",
        "CREATE_CLIENT_API_TOKEN",
        "UPDATE_CLIENT_API_TOKEN",
        "DELETE_CLIENT_API_TOKEN",
        "READ_CLIENT_API_TOKEN",
        "CREATE_FRONTEND_API_TOKEN",
        "UPDATE_FRONTEND_API_TOKEN",
        "DELETE_FRONTEND_API_TOKEN",
        "READ_FRONTEND_API_TOKEN",
        "UPDATE_MAINTENANCE_MODE",
        "UPDATE_INSTANCE_BANNERS",
        "UPDATE_AUTH_CONFIGURATION",
        "READ_LOGS",
        "UPDATE_CORS",
    }
)
PROJECT_PERMISSIONS = frozenset(
    {
        "CREATE_FEATURE",
        "UPDATE_FEATURE",
        "DELETE_FEATURE",
        "UPDATE_PROJECT",
        "DELETE_PROJECT",
        "UPDATE_FEATURE_VARIANTS",
        "MOVE_FEATURE_TOGGLE",
        "READ_PROJECT_API_TOKEN",
        "CREATE_PROJECT_API_TOKEN",
        "DELETE_PROJECT_API_TOKEN",
        "UPDATE_PROJECT_SEGMENT",
        "UPDATE_FEATURE_DEPENDENCY",
        "PROJECT_USER_ACCESS_READ",
        "PROJECT_USER_ACCESS_WRITE",
        "PROJECT_DEFAULT_STRATEGY_READ",
        "PROJECT_DEFAULT_STRATEGY_WRITE",
        "PROJECT_CHANGE_REQUEST_READ",
        "PROJECT_CHANGE_REQUEST_WRITE",
        "PROJECT_SETTINGS_READ",
        "PROJECT_SETTINGS_WRITE",
        "UPDATE_PROJECT_CONTEXT",
        "UPDATE_PROJECT_RELEASE_TEMPLATE",
    }
)
# Granted per environment in a project role (a permission item with `environment`).
ENVIRONMENT_PERMISSIONS = frozenset(
    {
        "CREATE_FEATURE_STRATEGY",
        "UPDATE_FEATURE_STRATEGY",
        "DELETE_FEATURE_STRATEGY",
        "UPDATE_FEATURE_ENVIRONMENT",
        "UPDATE_FEATURE_ENVIRONMENT_VARIANTS",
        "APPROVE_CHANGE_REQUEST",
        "APPLY_CHANGE_REQUEST",
        "SKIP_CHANGE_REQUEST",
    }
)
ALL_PERMISSIONS = ROOT_PERMISSIONS | PROJECT_PERMISSIONS | ENVIRONMENT_PERMISSIONS
# Stable numeric ids for the by-id body shape of POST /api/admin/roles: position in this order.
PERMISSION_IDS = {name: index + 1 for index, name in enumerate(sorted(ALL_PERMISSIONS))}
PERMISSION_NAMES = {index: name for name, index in PERMISSION_IDS.items()}

ROOT_TYPES = ("root", "root-custom")
PROJECT_TYPES = ("project", "custom")
ADMIN_ROLE, EDITOR_ROLE, VIEWER_ROLE, OWNER_ROLE, MEMBER_ROLE, READER_ROLE = 1, 2, 3, 4, 5, 6

_EDITOR_ROOT = frozenset(
    {
        "CREATE_PROJECT",
        "CREATE_STRATEGY",
        "UPDATE_STRATEGY",
        "DELETE_STRATEGY",
        "CREATE_TAG_TYPE",
        "UPDATE_TAG_TYPE",
        "DELETE_TAG_TYPE",
        "CREATE_CONTEXT_FIELD",
        "UPDATE_CONTEXT_FIELD",
        "DELETE_CONTEXT_FIELD",
        "CREATE_SEGMENT",
        "UPDATE_SEGMENT",
        "DELETE_SEGMENT",
        "UPDATE_APPLICATION",
        "CREATE_CLIENT_API_TOKEN",
        "UPDATE_CLIENT_API_TOKEN",
        "DELETE_CLIENT_API_TOKEN",
        "READ_CLIENT_API_TOKEN",
        "CREATE_FRONTEND_API_TOKEN",
        "UPDATE_FRONTEND_API_TOKEN",
        "DELETE_FRONTEND_API_TOKEN",
        "READ_FRONTEND_API_TOKEN",
        "READ_ROLE",
    }
)
_MEMBER = frozenset(
    {
        "CREATE_FEATURE",
        "UPDATE_FEATURE",
        "DELETE_FEATURE",
        "UPDATE_FEATURE_VARIANTS",
        "UPDATE_FEATURE_DEPENDENCY",
        "MOVE_FEATURE_TOGGLE",
        "PROJECT_USER_ACCESS_READ",
    }
)


@dataclass(frozen=True)
class BuiltInRole:
    id: int
    name: str
    type: str
    description: str
    permissions: frozenset[str] | set[str]
    # Editor: its project and environment permissions hold in every project (Unleash's Editor edits flags
    # everywhere); Owner and Member: environment permissions hold in every environment of their project.
    every_project: bool = False


BUILT_IN_ROLES = (
    BuiltInRole(
        ADMIN_ROLE,
        "Admin",
        "root",
        "Users with the root admin role have superuser access.",
        frozenset({ADMIN}),
    ),
    BuiltInRole(
        EDITOR_ROLE,
        "Editor",
        "root",
        "Users with the root editor role have access to most features, but cannot manage users and roles.",
        _EDITOR_ROOT | _MEMBER | ENVIRONMENT_PERMISSIONS,
        every_project=True,
    ),
    BuiltInRole(VIEWER_ROLE, "Viewer", "root", "Users with the root viewer role can only read.", frozenset()),
    BuiltInRole(
        OWNER_ROLE,
        "Owner",
        "project",
        "Users with the project owner role have full control over the project.",
        PROJECT_PERMISSIONS | ENVIRONMENT_PERMISSIONS,
    ),
    BuiltInRole(
        MEMBER_ROLE,
        "Member",
        "project",
        "Users with the project member role can change the project's flags.",
        _MEMBER | ENVIRONMENT_PERMISSIONS,
    ),
    BuiltInRole(
        READER_ROLE, "Reader", "project", "Users with the project reader role can only read.", frozenset()
    ),
)
BUILT_IN = {role.id: role for role in BUILT_IN_ROLES}


@dataclass(frozen=True)
class Need:
    """What a route needs: a permission (None: any signed-in user acting for itself), and where the project
    and environment it applies to come from: `path:<param>` or `feature:<param>` (the named flag's).
    `any_caller`: a POST that changes nothing (the playground evaluates), open to every signed-in caller
    and admin token, as a GET is."""

    permission: str | None
    project: str | None = None
    environment: str | None = None
    any_caller: bool = False


_IN_PROJECT = "path:project_id"
_IN_ENV = "path:environment"
_OF_FEATURE = "feature:name"

ROUTE_NEEDS: dict[str, Need] = {
    "api_tokens.create_token": Need("CREATE_CLIENT_API_TOKEN"),
    "api_tokens.delete_token": Need("DELETE_CLIENT_API_TOKEN"),
    "projects.create_project": Need("CREATE_PROJECT"),
    "projects.update_project": Need("UPDATE_PROJECT", _IN_PROJECT),
    "projects.delete_project": Need("DELETE_PROJECT", _IN_PROJECT),
    "environments.create_environment": Need(ADMIN),
    "environments.environment_on": Need(ADMIN),
    "environments.environment_off": Need(ADMIN),
    "segments.create_segment": Need("CREATE_SEGMENT"),
    "segments.update_segment": Need("UPDATE_SEGMENT"),
    "segments.delete_segment": Need("DELETE_SEGMENT"),
    "features.create_feature": Need("CREATE_FEATURE", _IN_PROJECT),
    "features.update_feature": Need("UPDATE_FEATURE", _IN_PROJECT),
    "features.archive_feature": Need("DELETE_FEATURE", _IN_PROJECT),
    "features.put_variants": Need("UPDATE_FEATURE_ENVIRONMENT_VARIANTS", _IN_PROJECT, _IN_ENV),
    "features.put_variants_everywhere": Need("UPDATE_FEATURE_VARIANTS", _IN_PROJECT),
    "features.add_dependency": Need("UPDATE_FEATURE_DEPENDENCY", _IN_PROJECT),
    "features.remove_dependency": Need("UPDATE_FEATURE_DEPENDENCY", _IN_PROJECT),
    "features.remove_dependencies": Need("UPDATE_FEATURE_DEPENDENCY", _IN_PROJECT),
    "features.feature_on": Need("UPDATE_FEATURE_ENVIRONMENT", _IN_PROJECT, _IN_ENV),
    "features.feature_off": Need("UPDATE_FEATURE_ENVIRONMENT", _IN_PROJECT, _IN_ENV),
    "features.delete_archived": Need("DELETE_FEATURE", _OF_FEATURE),
    "features.revive_feature": Need("UPDATE_FEATURE", _OF_FEATURE),
    "strategies.add_strategy": Need("CREATE_FEATURE_STRATEGY", _IN_PROJECT, _IN_ENV),
    "strategies.replace_strategy": Need("UPDATE_FEATURE_STRATEGY", _IN_PROJECT, _IN_ENV),
    "strategies.delete_strategy": Need("DELETE_FEATURE_STRATEGY", _IN_PROJECT, _IN_ENV),
    "strategies.set_sort_order": Need("UPDATE_FEATURE_STRATEGY", _IN_PROJECT, _IN_ENV),
    "tags.add_tag": Need("UPDATE_FEATURE", _OF_FEATURE),
    "tags.remove_tag": Need("UPDATE_FEATURE", _OF_FEATURE),
    "users.create_user": Need(ADMIN),
    "users.update_user": Need(ADMIN),
    "users.delete_user": Need(ADMIN),
    "personal_tokens.create_token": Need(None),
    "personal_tokens.delete_token": Need(None),
    "invites.create_invite": Need(ADMIN),
    "invites.update_invite": Need(ADMIN),
    "roles.create_role": Need(ADMIN),
    "roles.update_role": Need(ADMIN),
    "roles.delete_role": Need(ADMIN),
    "groups.create_group": Need(ADMIN),
    "groups.update_group": Need(ADMIN),
    "groups.delete_group": Need(ADMIN),
    "access.set_access": Need("PROJECT_USER_ACCESS_WRITE", _IN_PROJECT),
    "access.add_access": Need("PROJECT_USER_ACCESS_WRITE", _IN_PROJECT),
    "playground.evaluate": Need(None, any_caller=True),
}
# GET routes that need more than being signed in: API token secrets are not for every reader.
READ_NEEDS: dict[str, Need] = {
    "api_tokens.list_tokens": Need("READ_CLIENT_API_TOKEN"),
    "personal_tokens.list_tokens": Need(None),
}
