"""Where a gateway service hands a request in which something addressed the judge to the
audit: the reporter's type (`AddressingReporter`, the gateway's `AuditSubmitter.addressing`)
and the one hand-over every judge kind calls (`hand_over`)."""

from collections.abc import Callable

from rubricate_client.schemas.audit import AddressingReport

AddressingReporter = Callable[[str, AddressingReport], None]
"""Where a request in which something addressed the judge is handed to the audit (tenant,
report); it returns at once and never raises (`AuditSubmitter.addressing`)."""


def hand_over(
    audit: AddressingReporter | None, tenant: str | None, report: AddressingReport
) -> None:
    """Hand a request in which something addressed the judge to the audit, when there is an
    audit and a tenant (the reporter returns at once and never raises)."""
    if audit is not None and tenant is not None and (report.markers or report.flagged):
        audit(tenant, report)
