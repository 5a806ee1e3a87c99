// The portal's one script. On a page that shows a secret once (#once), it
// reveals the copy button and makes the page's history entry a plain visit
// of the page the secret belongs to, so that reloading it, or coming back
// to it, sends no form again and shows the secret no more. Without it the
// secret is still shown, to be selected and copied by hand.
"use strict";

for (const button of document.querySelectorAll("button[data-copy]")) {
  const field = document.getElementById(button.dataset.copy);
  button.hidden = false;
  button.addEventListener("click", async () => {
    field.select();
    let copied = false;
    try {
      await navigator.clipboard.writeText(field.value);
      copied = true;
    } catch {
      copied = document.execCommand("copy");
    }
    button.textContent = copied ? "Copied" : "Press Ctrl+C to copy";
  });
}

const once = document.getElementById("once");
if (once && once.dataset.then) {
  history.replaceState(null, "", once.dataset.then);
}
