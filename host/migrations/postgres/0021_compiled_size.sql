-- What a component costs once compiled (issue 53): an artifact reaches tens of times its
-- upload, and a tenant's deployed-bytes quota counts both. Expand only: a nullable column
-- (a component stored before it counts its upload alone).
ALTER TABLE components ADD COLUMN compiled_size BIGINT;
