package media

import (
	"context"
	"errors"

	"weft/extract"
)

// DefaultThumbSide is the longest side of a thumbnail.
const DefaultThumbSide = extract.DefaultThumbSide

// Thumbnail makes the PNG thumbnail of an image in extract's jail (see
// extract.ThumbnailInProcess: fit in maxSide × maxSide, EXIF orientation
// applied, a GIF's first frame). Refusals, an image that needs more
// memory or time than a reader may have included, wrap ErrRefused;
// cancellation gives ctx.Err().
func Thumbnail(ctx context.Context, data []byte, maxSide int) ([]byte, error) {
	out, err := extract.Thumbnail(ctx, data, maxSide)
	var re *extract.ReadError
	switch {
	case err == nil:
		return out, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &re):
		return nil, refuse(err, "%s", re.Msg)
	}
	return nil, err
}
