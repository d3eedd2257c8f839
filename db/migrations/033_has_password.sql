-- Whether an account has a password its owner chose. An account made by
-- single sign-on has the hash of a secret nobody knows (false) until a
-- password-reset link gives it one. Linking a provider's identity to an
-- existing account by its email needs the account's password
-- (handlers/oidc_link.go), which such an account cannot give.
ALTER TABLE users ADD COLUMN has_password boolean NOT NULL DEFAULT true;

-- The accounts single sign-on made so far: each was inserted in the same
-- transaction as its first identity, so both rows have the same now().
UPDATE users u SET has_password = false
WHERE EXISTS (SELECT 1 FROM user_identities i WHERE i.user_id = u.id AND i.created_at = u.created_at);
