"""Trainer rewards: `POST /get_reward`, one scalar reward per sample for OpenRLHF, veRL and TRL.
Only a `gateway/` role. It combines other capabilities without importing them (typed
functions in `gateway.service.RewardCapabilities`, bound by the gateway service); it imports
only `common`, `core` and the client."""
