"""`vramtui offers import FILE`: a provider's offers, as the user saved them, into the user's
catalogue overlay.

The input is a CSV or JSON file in vramtui's own import schema (docs/catalog-offers.md,
"Importing offers"), or the JSON that a provider's CLI or public API returns (the adapters in
`vramtui.offer_import.adapters`). Each good row becomes one offer TOML file in
`<catalogue dir>/offers/`; each bad row is one line naming the row, the problem and the fix.
Fetching stays the user's step: nothing here touches the network.
"""
