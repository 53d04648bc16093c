"""The store's bank and snapshot routes as typed endpoint values, declared once: the store's
route decorators take their paths from here and the gateway calls them with
`ServiceClient.call(ENDPOINT, body, path={...})` (segments escaped by `Endpoint.url_path`).
The snapshot export is JSON Lines (`JsonLines`): read as a stream, not validated."""

from rubricate.reflections.store.schemas import (
    BankCurationIn,
    BankItemIn,
    OfferResponse,
    ReindexResponse,
    RetrieveRequest,
    RetrieveResponse,
)
from rubricate_client.endpoints import Endpoint, JsonLines, NoBody
from rubricate_client.schemas.bank import (
    BankItemCurationResult,
    BankItemHistory,
    BankItemList,
    BankStats,
    RestoreRequest,
    RestoreResponse,
    RetrievedItem,
    SnapshotInfo,
    SnapshotList,
    SnapshotRequest,
)

BANK_OFFER = Endpoint(
    name="store_bank_offer",
    method="POST",
    path="/v1/bank/items",
    request=BankItemIn,
    response=OfferResponse,
    rpc=None,
)
BANK_ITEMS = Endpoint(
    name="store_bank_items",
    method="GET",
    path="/v1/bank/items",
    request=NoBody,
    response=BankItemList,
    rpc=None,
    query_params=("status", "search", "offset", "limit"),
)
BANK_ITEM = Endpoint(
    name="store_bank_item",
    method="GET",
    path="/v1/bank/items/{question_hash}",
    request=NoBody,
    response=RetrievedItem,
    rpc=None,
)
BANK_ITEM_CURATE = Endpoint(
    name="store_bank_item_curate",
    method="POST",
    path="/v1/bank/items/{question_hash}/curate",
    request=BankCurationIn,
    response=BankItemCurationResult,
    rpc=None,
)
BANK_ITEM_HISTORY = Endpoint(
    name="store_bank_item_history",
    method="GET",
    path="/v1/bank/items/{question_hash}/history",
    request=NoBody,
    response=BankItemHistory,
    rpc=None,
)
BANK_RETRIEVE = Endpoint(
    name="store_bank_retrieve",
    method="POST",
    path="/v1/bank/retrieve",
    request=RetrieveRequest,
    response=RetrieveResponse,
    rpc=None,
)
BANK_STATS = Endpoint(
    name="store_bank_stats",
    method="GET",
    path="/v1/bank/stats",
    request=NoBody,
    response=BankStats,
    rpc=None,
)
BANK_REINDEX = Endpoint(
    name="store_bank_reindex",
    method="POST",
    path="/v1/bank/reindex",
    request=NoBody,
    response=ReindexResponse,
    rpc=None,
)
SNAPSHOT_CREATE = Endpoint(
    name="store_snapshot_create",
    method="POST",
    path="/v1/bank/snapshots",
    request=SnapshotRequest,
    response=SnapshotInfo,
    rpc=None,
)
SNAPSHOTS = Endpoint(
    name="store_snapshots",
    method="GET",
    path="/v1/bank/snapshots",
    request=NoBody,
    response=SnapshotList,
    rpc=None,
)
SNAPSHOT_RESTORE = Endpoint(
    name="store_snapshot_restore",
    method="POST",
    path="/v1/bank/restore",
    request=RestoreRequest,
    response=RestoreResponse,
    rpc=None,
)
SNAPSHOT_EXPORT = Endpoint(
    name="store_snapshot_export",
    method="GET",
    path="/v1/bank/snapshots/{step}/export",
    request=NoBody,
    response=JsonLines,
    rpc=None,
)
SNAPSHOT_IMPORT = Endpoint(
    name="store_snapshot_import",
    method="POST",
    path="/v1/bank/snapshots/import",
    request=JsonLines,
    response=SnapshotInfo,
    rpc=None,
)
