"""Reward audit: a reference judge re-scores sampled groups; drift and gaming signals."""
