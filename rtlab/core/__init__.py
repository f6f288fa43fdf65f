"""The typed basics every stage shares: the result model, typed and ranged input values, declarative data files, file/process/timing helpers."""
