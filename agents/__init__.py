"""Learned policies (stable-baselines3)."""
