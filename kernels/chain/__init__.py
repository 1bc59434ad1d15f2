"""The N-link 3D pendulum on (TS²)^N: model, O(N) vector field, family registration."""
