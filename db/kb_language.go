package db

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Languages are the text-search configurations a knowledge base may be
// indexed in (PostgreSQL's snowball stemmers, and simple: no stemming);
// the CHECK of knowledge_bases.language holds the same list.
var Languages = []string{"simple", "arabic", "armenian", "basque", "catalan", "danish", "dutch", "english",
	"finnish", "french", "german", "greek", "hindi", "hungarian", "indonesian", "irish", "italian",
	"lithuanian", "nepali", "norwegian", "portuguese", "romanian", "russian", "serbian", "spanish",
	"swedish", "tamil", "turkish", "yiddish"}

// StartLanguage records the language one of the user's knowledge bases
// moves to and calls enqueue in the same transaction; the chunks are
// indexed again by that job (SwitchLanguage). A move already waiting is
// replaced by this one.
func (d *DB) StartLanguage(ctx context.Context, user, kb int64, lang string, enqueue func(tx pgx.Tx) error) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		if err := execOne(ctx, tx, `UPDATE knowledge_bases SET pending_language = $3, updated_at = now()
			WHERE id = $1 AND owner_id = $2`, kb, user, lang); err != nil {
			return err
		}
		return enqueue(tx)
	}))
}

// SwitchLanguage indexes every chunk of a knowledge base again in its
// pending language, counts its words again and makes it the language
// searched, in one transaction: a search sees the old index or the new
// one, never a mix. Nothing pending: nothing done.
func (d *DB) SwitchLanguage(ctx context.Context, kbID int64) error {
	return mapErr(d.InTx(ctx, func(tx pgx.Tx) error {
		// kbWrite (kb_locks.go): writers of the chunks and word counts wait
		// for the switch; uploads and attachments to threads do not.
		var lang string
		if err := tx.QueryRow(ctx, "SELECT pending_language FROM knowledge_bases WHERE id = $1 FOR "+kbWrite, kbID).Scan(&lang); err != nil {
			return err
		}
		if lang == "" {
			return nil
		}
		// Every generation: a move to another embedding model copies
		// chunks with their language.
		if _, err := tx.Exec(ctx, "UPDATE kb_chunks SET lang = $2 WHERE kb_id = $1 AND lang <> $2", kbID, lang); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM kb_lexemes WHERE kb_id = $1", kbID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO kb_lexemes (kb_id, word, chunks)
			SELECT c.kb_id, l.lexeme, count(*)
			FROM kb_chunks c JOIN kb_documents d ON d.id = c.document_id AND d.status = 'ready'
				JOIN knowledge_bases k ON k.id = c.kb_id AND k.generation = c.generation,
				unnest(tsvector_to_array(c.tsv)) l(lexeme)
			WHERE c.kb_id = $1 GROUP BY c.kb_id, l.lexeme`, kbID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "UPDATE knowledge_bases SET language = $2, pending_language = '', updated_at = now() WHERE id = $1", kbID, lang)
		return err
	}))
}
