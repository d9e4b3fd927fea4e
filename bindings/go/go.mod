module llmrt

go 1.19
