// Keeps llmrt_test_support non-empty.
