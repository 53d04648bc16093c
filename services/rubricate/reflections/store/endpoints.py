"""The store's bank and snapshot routes as internal route values, declared once
(`common.endpoints`): the store's routes take their paths from here and the gateway calls them
with `ServiceClient.call(ENDPOINT, body, path={...})` (segments escaped by
`Endpoint.url_path`). The snapshot export is JSON Lines (`JsonLines`): read as a stream, not
validated; the import sends it raw."""

from rubricate.common.endpoints import get, post
from rubricate.reflections.store.schemas import (
    BankCurationIn,
    BankItemIn,
    OfferResponse,
    ReindexResponse,
    RetrieveRequest,
    RetrieveResponse,
)
from rubricate_client.endpoints import JsonLines, NoBody
from rubricate_client.schemas import bank

_ITEM = "/v1/bank/items/{question_hash}"

BANK_OFFER = post("store_bank_offer", "/v1/bank/items", BankItemIn, OfferResponse)
BANK_ITEMS = get(
    "store_bank_items", "/v1/bank/items", bank.BankItemList, "status", "search", "offset", "limit"
)
BANK_ITEM = get("store_bank_item", _ITEM, bank.RetrievedItem)
BANK_ITEM_CURATE = post(
    "store_bank_item_curate", f"{_ITEM}/curate", BankCurationIn, bank.BankItemCurationResult
)
BANK_ITEM_HISTORY = get("store_bank_item_history", f"{_ITEM}/history", bank.BankItemHistory)
BANK_RETRIEVE = post("store_bank_retrieve", "/v1/bank/retrieve", RetrieveRequest, RetrieveResponse)
BANK_STATS = get("store_bank_stats", "/v1/bank/stats", bank.BankStats)
BANK_REINDEX = post("store_bank_reindex", "/v1/bank/reindex", NoBody, ReindexResponse)
SNAPSHOT_CREATE = post(
    "store_snapshot_create", "/v1/bank/snapshots", bank.SnapshotRequest, bank.SnapshotInfo
)
SNAPSHOTS = get("store_snapshots", "/v1/bank/snapshots", bank.SnapshotList)
SNAPSHOT_RESTORE = post(
    "store_snapshot_restore", "/v1/bank/restore", bank.RestoreRequest, bank.RestoreResponse
)
SNAPSHOT_EXPORT = get("store_snapshot_export", "/v1/bank/snapshots/{step}/export", JsonLines)
SNAPSHOT_IMPORT = post(
    "store_snapshot_import", "/v1/bank/snapshots/import", JsonLines, bank.SnapshotInfo
)
