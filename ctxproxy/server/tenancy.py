"""Which tenant a request belongs to (DESIGN.md §6).

1. ``/t/{tenant}/v1/...`` names it. If that tenant lists ``api_keys``, the bearer token must be
   one of them.
2. Else a bearer token listed in some tenant's ``api_keys`` selects that tenant.
3. Else the tenant named ``default``, under the same key rule as 1.

A bearer token that is another tenant's proxy key is refused rather than passed upstream. A
refusal names the header the client's protocol carries its key in (``key_header``:
``Authorization: Bearer`` for OpenAI's paths, ``x-api-key`` for the Messages API's).
"""

from __future__ import annotations

from ctxproxy.config import Config, TenantConfig
from ctxproxy.config.loader import key_fingerprint
from ctxproxy.errors import TenantNotFound, Unauthorized
from ctxproxy.upstream.headers import BEARER, KeyHeader


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def resolve_tenant(
    config: Config, path_tenant: str | None, authorization: str | None, key_header: KeyHeader = BEARER
) -> TenantConfig:
    token = bearer_token(authorization)
    # No tenant lists proxy keys (the usual single-tenant proxy): no token is one, nothing to hash.
    key_owner = config.tenant_by_key.get(key_fingerprint(token)) if token and config.tenant_by_key else None

    if path_tenant is not None:
        tenant = config.tenants.get(path_tenant)
        if tenant is None:
            raise TenantNotFound(f"Unknown tenant {path_tenant!r} in the path /t/{path_tenant}/v1.")
        return _admit(tenant, key_owner, key_header)
    if key_owner is not None:
        return config.tenants[key_owner]
    default = config.tenants.get("default")
    if default is None:
        raise TenantNotFound(
            "No tenant selected: use base_url /t/<tenant>/v1, send a proxy key as the bearer token, "
            "or configure tenants/default.toml."
        )
    return _admit(default, key_owner, key_header)


def _admit(tenant: TenantConfig, key_owner: str | None, key_header: KeyHeader) -> TenantConfig:
    if tenant.api_keys and key_owner != tenant.name:
        raise Unauthorized(
            f"Tenant {tenant.name!r} requires a proxy key: send '{key_header.name}: {key_header.value('<key>')}' "
            "with one of its api_keys."
        )
    if key_owner is not None and key_owner != tenant.name:
        raise Unauthorized(f"The proxy key does not belong to tenant {tenant.name!r}.")
    return tenant
