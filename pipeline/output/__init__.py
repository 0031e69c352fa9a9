"""The committed output, owned here: where its files live (`layout`), the record tables (`tables`), staging and
the atomic commit (`commit`), the typed manifests and the one reader of what is committed (`manifest.committed`),
and SQL over it (`query`). Nothing outside this package builds an output path by hand."""
