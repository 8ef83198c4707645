package console

import "net/http"

func (c *Console) figures(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "problem.html", problem{Title: "Figures", Message: "pending"})
}
