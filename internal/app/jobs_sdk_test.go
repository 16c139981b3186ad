//lint:file-ignore SA1019 the SDK marks its Videos API deprecated (OpenAI shut Sora down on 2026-09-24); the protocol lives on in compatible upstreams, and this checks the SDK still works through Sluice.

package app_test

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// TestVideoJobThroughTheOpenAISDK: the official SDK, which sends the submit
// as a multipart form, creates, polls, downloads and deletes a video through
// Sluice; the upstream gets the deployment's model in the form, and the SDK
// only ever sees Sluice's job ID.
func TestVideoJobThroughTheOpenAISDK(t *testing.T) {
	tpl := strings.Replace(jobsTemplate, "- alias: sora\n", "- alias: sora-fast\n", 1) // an alias that is not the upstream model
	h := newJobsHarness(t, tpl, "{backend: memory}")
	client := h.sdk(keyWeb)
	ctx := t.Context()
	v, err := client.Videos.New(ctx, openai.VideoNewParams{Model: "sora-fast", Prompt: "a red kite over dunes at dusk", Seconds: "8"})
	if err != nil {
		t.Fatalf("Videos.New: %v", err)
	}
	sub := submits(h.simA)[0]
	if !strings.HasPrefix(sub.Header.Get("Content-Type"), "multipart/form-data") || sub.Model != "sora-2" {
		t.Errorf("upstream submit: %s, model %q; want the multipart form with model sora-2", sub.Header.Get("Content-Type"), sub.Model)
	}
	if !strings.HasPrefix(v.ID, "video_") || v.Seconds != "8" || strings.Contains(string(sub.Body), v.ID) {
		t.Errorf("Videos.New = %s (%s s)", v.ID, v.Seconds)
	}
	for v.Status != openai.VideoStatusCompleted {
		time.Sleep(100 * time.Millisecond)
		if v, err = client.Videos.Get(ctx, v.ID); err != nil {
			t.Fatalf("Videos.Get: %v", err)
		}
	}
	resp, err := client.Videos.DownloadContent(ctx, v.ID, openai.VideoDownloadContentParams{})
	if err != nil {
		t.Fatalf("Videos.DownloadContent: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "video/mp4" || !bytes.Contains(b, []byte("ftyp")) {
		t.Errorf("content = %s, %d bytes", resp.Header.Get("Content-Type"), len(b))
	}
	del, err := client.Videos.Delete(ctx, v.ID)
	if err != nil || !del.Deleted || del.ID != v.ID {
		t.Fatalf("Videos.Delete = %+v, %v", del, err)
	}
	if _, err := client.Videos.Get(ctx, v.ID); err == nil {
		t.Error("Videos.Get of a deleted video succeeded")
	}
	if _, err := h.sdk(testEnv["KEY_BG"]).Videos.Get(ctx, v.ID); err == nil {
		t.Error("another key's Videos.Get succeeded")
	}
}
