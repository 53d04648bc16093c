"""Judge-fidelity evaluation: run the platform's judges on labelled data and measure agreement."""
